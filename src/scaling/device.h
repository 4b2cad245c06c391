// Compute figures of devices we cannot run (`plan --scale reference`): a benchmark's training
// throughput per device from a published source, turned into a ScalingProfile. Each figure carries
// its citation; nothing here is measured by us.
#pragma once
#include <string>
#include <vector>

#include "scaling/step_model.h"

namespace mlpd::scaling {

struct DeviceFigure {
  std::string benchmark;       // "resnet"
  std::string device;          // "a100", "h100"
  double samples_per_s = 0.0;  // training throughput of one device (forward + backward + optimizer)
  int per_rank_batch = 0;      // the batch per device the figure was measured at (0: unknown)
  double parameters = 0.0;     // trainable parameters: the gradient elements allreduced per step
  std::string intra;           // the intra-node link preset of that device's node ("nvlink3")
  std::string source;          // the citation, and how the figure was derived from it
  std::string params_source;
};

const std::vector<DeviceFigure>& device_figures();
// UserError (exit 2) naming the known devices for that benchmark (or saying there is none).
const DeviceFigure& find_device_figure(const std::string& benchmark, const std::string& device);

// seconds_per_sample = 1 / samples_per_s, no fixed compute, no other_s (the throughput is of whole
// steps: the optimizer is inside the per-sample time), grad_bytes = parameters · wire_bytes,
// overlap and skew 0 (assumed; the caller may override), no core sharing (one GPU per rank).
ScalingProfile device_profile(const DeviceFigure& f, double wire_bytes_per_param, AllreduceAlgo algo);

}  // namespace mlpd::scaling
