#include "train/optimizer.h"

#include "core/check.h"
#include <cmath>

#include "kernels/device.h"

namespace mlpd {

namespace {

bool is_adam(const Optimizer& o) { return o.name == "adam" || o.name == "lazy_adam"; }

bool on_device(const Optimizer& o) { return o.device != Device::cpu; }
float* velocity_data(Optimizer& o) { return on_device(o) ? o.device_velocity : o.velocity.data(); }
float* second_moment_data(Optimizer& o) { return on_device(o) ? o.device_second_moment : o.second_moment.data(); }

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
  const OpTable& o = ops_for(s.device);
  for (const ParamView& v : s.views) {
    float* p = params_data(s) + v.offset;
    const float* g = grads_data(s) + v.offset;
    float* m = velocity_data(opt) + v.offset;
    float* sq = second_moment_data(opt) + v.offset;
    if (lazy && ends_with(v.name, kLazyViewSuffix))
      o.lazy_adam_update(p, g, m, sq, v.count, lr, opt.beta1, opt.beta2, opt.epsilon, bias1, bias2);
    else
      o.adam_update(p, g, m, sq, v.count, lr, opt.beta1, opt.beta2, opt.epsilon, bias1, bias2);
  }
}

}  // namespace

void init_optimizer(Optimizer& opt, const ParamStore& s) {
  MLPD_CHECK(opt.name == "sgd" || opt.name == "lars" || is_adam(opt), "unknown optimizer " + opt.name);
  opt.velocity.assign(s.param_count, 0.0f);
  if (is_adam(opt)) opt.second_moment.assign(s.param_count, 0.0f);
  opt.steps = 0;
  opt.device = s.device;
  DeviceBytes norm = alloc_on(opt.device, sizeof(double));
  opt.norm_memory = std::shared_ptr<std::byte>(norm.release(), norm.get_deleter());
  opt.norm_sum = reinterpret_cast<double*>(opt.norm_memory.get());
  if (on_device(opt)) {
    const size_t floats = opt.velocity.size() + opt.second_moment.size();
    DeviceBytes moments = alloc_on(opt.device, floats * sizeof(float));
    opt.device_moments = std::shared_ptr<std::byte>(moments.release(), moments.get_deleter());
    opt.device_velocity = reinterpret_cast<float*>(opt.device_moments.get());
    opt.device_second_moment = opt.device_velocity + opt.velocity.size();
  }
}

void download_optimizer(Optimizer& opt) {
  if (!on_device(opt)) return;
  copy_to_host(opt.device, opt.velocity.data(), opt.device_velocity, opt.velocity.size() * sizeof(float));
  copy_to_host(opt.device, opt.second_moment.data(), opt.device_second_moment, opt.second_moment.size() * sizeof(float));
}

void upload_optimizer(Optimizer& opt) {
  if (!on_device(opt)) return;
  copy_to_device(opt.device, opt.device_velocity, opt.velocity.data(), opt.velocity.size() * sizeof(float));
  copy_to_device(opt.device, opt.device_second_moment, opt.second_moment.data(), opt.second_moment.size() * sizeof(float));
}

namespace {

// Scales every gradient by clip_norm / ||g|| when ||g|| (over the whole model) is larger. The sum
// of squares stays on the store's device: on a GPU clipping queues with no host wait.
void clip_gradients(const Optimizer& opt, ParamStore& s) {
  MLPD_CHECK(opt.norm_sum, "gradient clipping before init_optimizer");
  const OpTable& o = ops_for(s.device);
  zero_on(s.device, opt.norm_sum, sizeof(double));
  // On the CPU the sum of each view's sum (the order its results' bits depend on); on a GPU one
  // sum over the flat buffer.
  if (s.device == Device::cpu)
    for (const ParamView& v : s.views) o.sum_squares(grads_data(s) + v.offset, v.count, opt.norm_sum);
  else
    o.sum_squares(grads_data(s), s.param_count, opt.norm_sum);
  o.clip_by_global_norm(grads_data(s), s.param_count, opt.norm_sum, opt.clip_norm);
}

}  // namespace

void optimizer_step(Optimizer& opt, ParamStore& s, float lr) {
  if (opt.clip_norm > 0.0f) clip_gradients(opt, s);
  if (is_adam(opt)) {
    adam_step(opt, s, lr);
    return;
  }
  const OpTable& o = ops_for(s.device);
  for (const ParamView& v : s.views) {
    float* p = params_data(s) + v.offset;
    const float* g = grads_data(s) + v.offset;
    float* m = velocity_data(opt) + v.offset;
    // MLPerf's reference ResNet applies no weight decay to biases and batch-norm parameters.
    const bool is_weight = v.kind == ParamKind::weight;
    if (opt.name == "sgd") {
      o.sgd_momentum_update(p, g, m, v.count, lr, opt.momentum, is_weight ? opt.weight_decay : 0.0f);
    } else {
      o.lars_update(p, g, m, v.count, lr, opt.momentum, opt.weight_decay, opt.lars_eta, opt.lars_epsilon, !is_weight,
                    nullptr);
    }
  }
}

}  // namespace mlpd
