#include "train/optimizer.h"

#include "core/check.h"
#include <cmath>

#include "kernels/optim.h"

namespace mlpd {

namespace {

bool is_adam(const Optimizer& o) { return o.name == "adam" || o.name == "lazy_adam"; }

bool ends_with(const std::string& s, const char* suffix) {
  const std::string t(suffix);
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

void adam_step(Optimizer& opt, ParamStore& s, float lr) {
  ++opt.steps;
  const double t = static_cast<double>(opt.steps);
  const auto bias1 = static_cast<float>(1.0 - std::pow(static_cast<double>(opt.beta1), t));
  const auto bias2 = static_cast<float>(1.0 - std::pow(static_cast<double>(opt.beta2), t));
  const bool lazy = opt.name == "lazy_adam";
  for (const ParamView& v : s.views) {
    float* p = s.params.data() + v.offset;
    const float* g = s.grads.data() + v.offset;
    float* m = opt.velocity.data() + v.offset;
    float* sq = opt.second_moment.data() + v.offset;
    if (lazy && ends_with(v.name, kLazyViewSuffix))
      lazy_adam_update(p, g, m, sq, v.count, lr, opt.beta1, opt.beta2, opt.epsilon, bias1, bias2);
    else
      adam_update(p, g, m, sq, v.count, lr, opt.beta1, opt.beta2, opt.epsilon, bias1, bias2);
  }
}

}  // namespace

void init_optimizer(Optimizer& opt, const ParamStore& s) {
  MLPD_CHECK(opt.name == "sgd" || opt.name == "lars" || is_adam(opt), "unknown optimizer " + opt.name);
  opt.velocity.assign(s.params.size(), 0.0f);
  if (is_adam(opt)) opt.second_moment.assign(s.params.size(), 0.0f);
  opt.steps = 0;
}

void optimizer_step(Optimizer& opt, ParamStore& s, float lr) {
  if (is_adam(opt)) {
    adam_step(opt, s, lr);
    return;
  }
  for (const ParamView& v : s.views) {
    float* p = s.params.data() + v.offset;
    const float* g = s.grads.data() + v.offset;
    float* m = opt.velocity.data() + v.offset;
    // MLPerf's reference ResNet applies no weight decay to biases and batch-norm parameters.
    const bool is_weight = v.kind == ParamKind::weight;
    if (opt.name == "sgd") {
      sgd_momentum_update(p, g, m, v.count, lr, opt.momentum, is_weight ? opt.weight_decay : 0.0f);
    } else {
      lars_update(p, g, m, v.count, lr, opt.momentum, opt.weight_decay, opt.lars_eta, opt.lars_epsilon, !is_weight);
    }
  }
}

}  // namespace mlpd
