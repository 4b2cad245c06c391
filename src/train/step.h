// One data-parallel training step: zero gradients, local forward/backward, allreduce, update.
// The trainer and the throughput benchmark run exactly this.
#pragma once
#include <cstdint>

#include "comm/communicator.h"
#include "comm/world.h"
#include "train/optimizer.h"
#include "train/trace.h"
#include "workloads/workload.h"

namespace mlpd {

struct StepOutcome {
  double loss = 0.0;          // global mean loss of the step
  int64_t samples = 0;        // global samples in the step
  double comm_seconds = 0.0;  // time in the gradient allreduce
};

// Connects the workload's backward to the communicator: each finished view may start its bucket's
// allreduce; with a trace, each view's finish time is recorded. Call once after both exist.
void connect_gradients(Workload& wl, Communicator& comm, Trace* trace);

StepOutcome train_one_step(const World& w, Communicator& comm, Workload& wl, Optimizer& opt, float lr, int epoch,
                           int64_t batch, Trace* trace = nullptr);

}  // namespace mlpd
