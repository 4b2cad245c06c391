#include "train/optimizer.h"

#include "core/check.h"
#include "kernels/optim.h"

namespace mlpd {

void init_optimizer(Optimizer& opt, const ParamStore& s) {
  MLPD_CHECK(opt.name == "sgd" || opt.name == "lars", "unknown optimizer " + opt.name);
  opt.velocity.assign(s.params.size(), 0.0f);
}

void optimizer_step(Optimizer& opt, ParamStore& s, float lr) {
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
