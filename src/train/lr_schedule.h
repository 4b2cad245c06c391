// Learning-rate schedules: linear warmup, then step, cosine or polynomial decay; Adam's constant,
// inverse square root and GNMT schedules.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mlpd {

struct LrSchedule {
  std::string decay = "cosine";  // "step", "cosine", "poly", "ssd", "maskrcnn", "inverse_sqrt" or "gnmt"
  double base_lr = 0.1;
  double end_lr = 0.0;           // cosine and poly end here at total_steps
  double poly_power = 2.0;
  double warmup_epochs = 0.0;
  double decay_epochs = 1.0;     // length of the whole schedule (warmup included), in epochs
  std::vector<double> boundary_epochs;  // step decay: multiply by `factor` at each boundary
  double factor = 0.1;
  int64_t steps_per_epoch = 1;
  // Step-counted schedules (Adam in gnmt and transformer):
  //   "inverse_sqrt": base_lr * min((t+1) / warmup_steps, sqrt(warmup_steps / (t+1))) (fairseq's);
  //   "gnmt": MLPerf's GNMT reference: exponential warmup from base_lr/100 over warmup_steps, then
  //           base_lr until remain_steps, then times decay_factor every decay_interval steps, at
  //           most decay_count times.
  //   "ssd": MLPerf's SSD reference: linear warmup over warmup_steps from base_lr*(1 - 2^-f) / ...
  //          (lr = base_lr - (warmup_steps - t) * base_lr / (warmup_steps * 2^f), f = warmup_factor,
  //          an integer >= 0), then `factor` at each of boundary_epochs.
  //   "maskrcnn": MLPerf's Mask R-CNN reference (maskrcnn-benchmark's WarmupMultiStepLR, linear):
  //          base_lr * (warmup_factor * (1 - t / warmup_steps) + t / warmup_steps) during the
  //          warmup, then `factor` at each of boundary_steps (steps, not epochs).
  int64_t warmup_steps = 0;
  double warmup_factor = 0.0;
  std::vector<int64_t> boundary_steps;
  int64_t remain_steps = 0;
  int64_t decay_interval = 1;
  int64_t decay_count = 0;
};

// Learning rate for the step that starts after `step` completed steps.
double lr_at(const LrSchedule& s, int64_t step);

}  // namespace mlpd
