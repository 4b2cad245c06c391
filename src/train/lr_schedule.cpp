#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace mlpd {

double lr_at(const LrSchedule& s, int64_t step) {
  if (s.decay == "inverse_sqrt") {
    const double t = static_cast<double>(step + 1);
    if (s.warmup_steps <= 0) return s.base_lr;
    const double w = static_cast<double>(s.warmup_steps);
    return s.base_lr * std::min(t / w, std::sqrt(w / t));
  }
  if (s.decay == "gnmt") {
    if (step < s.warmup_steps) {
      // base_lr * 0.01^((warmup - step) / warmup): from base/100 up to base at warmup_steps.
      const double w = static_cast<double>(s.warmup_steps);
      return s.base_lr * std::pow(0.01, static_cast<double>(s.warmup_steps - step) / w);
    }
    if (step < s.remain_steps || s.decay_count <= 0) return s.base_lr;
    const int64_t decays = std::min(s.decay_count, (step - s.remain_steps) / std::max<int64_t>(1, s.decay_interval) + 1);
    return s.base_lr * std::pow(s.factor, static_cast<double>(decays));
  }
  if (s.decay == "maskrcnn") {
    double lr = s.base_lr;
    for (int64_t b : s.boundary_steps)
      if (step >= b) lr *= s.factor;
    if (step < s.warmup_steps) {
      const double a = static_cast<double>(step) / static_cast<double>(s.warmup_steps);
      lr *= s.warmup_factor * (1.0 - a) + a;
    }
    return lr;
  }
  const double spe = static_cast<double>(std::max<int64_t>(1, s.steps_per_epoch));
  if (s.decay == "ssd") {
    const double t = static_cast<double>(step);
    if (step < s.warmup_steps) {
      const double w = static_cast<double>(s.warmup_steps);
      return s.base_lr - (w - t) * s.base_lr / (w * std::pow(2.0, s.warmup_factor));
    }
    double lr = s.base_lr;
    for (double b : s.boundary_epochs)
      if (t >= b * spe) lr *= s.factor;
    return lr;
  }
  const double warmup_steps = s.warmup_epochs * spe;
  const double t = static_cast<double>(step);
  // Warmup from base_lr/warmup_steps up to base_lr (never exactly 0 on the first step).
  if (warmup_steps > 0 && t < warmup_steps) return s.base_lr * (t + 1.0) / warmup_steps;
  if (s.decay == "step") {
    double lr = s.base_lr;
    for (double b : s.boundary_epochs)
      if (t >= b * spe) lr *= s.factor;
    return lr;
  }
  const double total = std::max(1.0, s.decay_epochs * spe - warmup_steps);
  const double progress = std::clamp((t - warmup_steps) / total, 0.0, 1.0);
  if (s.decay == "poly") return s.end_lr + (s.base_lr - s.end_lr) * std::pow(1.0 - progress, s.poly_power);
  // cosine
  return s.end_lr + 0.5 * (s.base_lr - s.end_lr) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace mlpd
