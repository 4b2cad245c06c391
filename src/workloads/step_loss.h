// A step's loss where its loss ops add it (kernels/op_signatures.inc: every loss op adds its sum to
// a double of the op's memory): `terms` doubles in the memory of the workload's device. A workload
// zeroes them as its step begins (queued on a GPU), its loss ops add to them, and the step returns
// them in StepStats; the trainer reads them once, after the optimizer is queued. On a GPU that read
// is the step's one wait for the device: no loss brings the host to a halt between forward and
// backward.
#pragma once
#include "core/tensor.h"

namespace mlpd {

struct StepLoss {
  Device device = Device::cpu;
  DeviceBytes memory = no_device_bytes();
  int terms = 0;
  // Terms are summed a group at a time, then the groups in order: a workload whose step adds up
  // several named losses per micro-batch (maskrcnn's five) keeps the CPU's order of additions.
  int terms_per_group = 1;
};

StepLoss make_step_loss(Device d, int terms, int terms_per_group = 1);
// Zeroes the terms (queued on a GPU) and returns them.
double* begin_step_loss(StepLoss& l);
// The loss sum: the terms read (a wait on a GPU) and added, each group's in order, then the groups.
double read_step_loss(const StepLoss& l);

}  // namespace mlpd
