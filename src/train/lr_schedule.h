// Learning-rate schedules: linear warmup, then step, cosine or polynomial decay.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mlpd {

struct LrSchedule {
  std::string decay = "cosine";  // "step", "cosine" or "poly"
  double base_lr = 0.1;
  double end_lr = 0.0;           // cosine and poly end here at total_steps
  double poly_power = 2.0;
  double warmup_epochs = 0.0;
  double decay_epochs = 1.0;     // length of the whole schedule (warmup included), in epochs
  std::vector<double> boundary_epochs;  // step decay: multiply by `factor` at each boundary
  double factor = 0.1;
  int64_t steps_per_epoch = 1;
};

// Learning rate for the step that starts after `step` completed steps.
double lr_at(const LrSchedule& s, int64_t step);

}  // namespace mlpd
