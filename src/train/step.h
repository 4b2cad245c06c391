// One data-parallel training step: zero gradients, local forward/backward, allreduce, update.
// The trainer and the throughput benchmark run exactly this.
#pragma once
#include <cstdint>

#include "comm/world.h"
#include "train/optimizer.h"
#include "workloads/workload.h"

namespace mlpd {

struct StepOutcome {
  double loss = 0.0;          // global mean loss of the step
  int64_t samples = 0;        // global samples in the step
  double comm_seconds = 0.0;  // time in the gradient allreduce
};

StepOutcome train_one_step(const World& w, Workload& wl, Optimizer& opt, float lr, int epoch, int64_t batch);

}  // namespace mlpd
