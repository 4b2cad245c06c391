// One data-parallel training step: zero gradients, local forward/backward (each finished view may
// start its bucket's allreduce), wait for the buckets, update, and the global mean loss. The
// trainer, every workload's own driver and the benchmarks run exactly this.
#pragma once
#include <cstdint>

#include "comm/communicator.h"
#include "comm/world.h"
#include "train/optimizer.h"
#include "train/trace.h"
#include "workloads/workload.h"

namespace mlpd {

struct StepOutcome {
  double loss = 0.0;          // global mean loss of the step (loss_sum / loss_weight over ranks)
  double work = 0.0;          // global work of the step, in the workload's unit
  double comm_seconds = 0.0;  // time waiting for the gradient allreduce after backward
  double compute_seconds = 0.0;  // zero grads .. this rank's backward done
  double other_seconds = 0.0;    // optimizer step and the loss allreduce
  double comm_busy_seconds = 0.0;  // first bucket submitted .. last completed (needs record_spans)
  double comm_bytes = 0.0;         // bytes the step's recorded spans carried
  bool stop_requested = false;  // some rank got a stop signal (train/stop_signal.h): all agree
};

StepOutcome train_one_step(const World& w, Communicator& comm, Workload& wl, Optimizer& opt, float lr, int epoch,
                           int64_t step, Trace* trace = nullptr);

}  // namespace mlpd
