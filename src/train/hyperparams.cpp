#include "train/hyperparams.h"

#include <cmath>

#include "core/check.h"
#include "mlperf/keys.h"

namespace mlpd {

Hyperparams make_hyperparams(const nlohmann::json& cfg, int64_t steps_per_epoch) {
  Hyperparams h;
  Optimizer& o = h.optimizer;
  LrSchedule& s = h.schedule;
  o.name = cfg.at("opt_name").get<std::string>();
  s.steps_per_epoch = steps_per_epoch;
  auto& log = h.mllog_entries;
  log.emplace_back(keys::kOptName, o.name);
  if (o.name == keys::kAdam || o.name == keys::kLazyAdam) {
    // MLPerf v0.5 NCF: Adam at a constant learning rate; LR and the three Adam constants tunable.
    o.beta1 = cfg.at("opt_adam_beta_1").get<float>();
    o.beta2 = cfg.at("opt_adam_beta_2").get<float>();
    o.epsilon = cfg.at("opt_adam_epsilon").get<float>();
    o.momentum = 0.0f;
    o.weight_decay = 0.0f;
    s.decay = "step";  // no boundaries, no warmup: constant
    s.base_lr = cfg.at("opt_base_learning_rate").get<double>();
    s.warmup_epochs = 0.0;
    s.boundary_epochs.clear();
    if (!(s.base_lr > 0.0)) throw UserError("opt_base_learning_rate must be positive", 2);
    if (!(o.beta1 >= 0.0f && o.beta1 < 1.0f && o.beta2 >= 0.0f && o.beta2 < 1.0f))
      throw UserError("opt_adam_beta_1 and opt_adam_beta_2 must lie in [0, 1)", 2);
    if (!(o.epsilon > 0.0f)) throw UserError("opt_adam_epsilon must be positive", 2);
    log.emplace_back(keys::kOptBaseLearningRate, s.base_lr);
    // The config's values (doubles), so the log reads 0.9 rather than 0.8999999761581421.
    log.emplace_back(keys::kOptAdamBeta1, cfg.at("opt_adam_beta_1").get<double>());
    log.emplace_back(keys::kOptAdamBeta2, cfg.at("opt_adam_beta_2").get<double>());
    log.emplace_back(keys::kOptAdamEpsilon, cfg.at("opt_adam_epsilon").get<double>());
    return h;
  }
  s.decay_epochs = cfg.at("lr_decay_epochs").get<double>();
  const int64_t decay_steps = static_cast<int64_t>(std::llround(s.decay_epochs * static_cast<double>(steps_per_epoch)));
  if (o.name == keys::kLars) {
    // MLPerf's LARS schedule is fixed: warmup then polynomial decay.
    o.momentum = cfg.at("lars_opt_momentum").get<float>();
    o.weight_decay = cfg.at("lars_opt_weight_decay").get<float>();
    o.lars_epsilon = cfg.at("lars_epsilon").get<float>();
    o.lars_eta = cfg.at("lars_opt_trust_coefficient").get<float>();
    s.decay = "poly";
    s.base_lr = cfg.at("lars_opt_base_learning_rate").get<double>();
    s.end_lr = cfg.at("lars_opt_end_learning_rate").get<double>();
    s.poly_power = cfg.at("lars_opt_learning_rate_decay_poly_power").get<double>();
    s.warmup_epochs = cfg.at("lars_opt_learning_rate_warmup_epochs").get<double>();
    log.emplace_back(keys::kLarsOptBaseLearningRate, s.base_lr);
    log.emplace_back(keys::kLarsOptEndLearningRate, s.end_lr);
    log.emplace_back(keys::kLarsOptLearningRateDecayPolyPower, s.poly_power);
    log.emplace_back(keys::kLarsOptLearningRateDecaySteps, decay_steps);
    log.emplace_back(keys::kLarsOptLearningRateWarmupEpochs, s.warmup_epochs);
    log.emplace_back(keys::kLarsOptMomentum, o.momentum);
    log.emplace_back(keys::kLarsOptWeightDecay, o.weight_decay);
    log.emplace_back(keys::kLarsEpsilon, o.lars_epsilon);
  } else {
    o.momentum = cfg.at("opt_momentum").get<float>();
    o.weight_decay = cfg.at("opt_weight_decay").get<float>();
    s.decay = cfg.at("lr_decay").get<std::string>();
    if (s.decay != "poly" && s.decay != "cosine" && s.decay != "step")
      throw UserError("lr_decay = " + s.decay + ": use poly, cosine or step", 2);
    s.base_lr = cfg.at("opt_base_learning_rate").get<double>();
    s.end_lr = cfg.at("opt_end_learning_rate").get<double>();
    s.poly_power = cfg.at("opt_learning_rate_decay_poly_power").get<double>();
    s.warmup_epochs = cfg.at("opt_learning_rate_warmup_epochs").get<double>();
    s.boundary_epochs = cfg.at("opt_learning_rate_decay_boundary_epochs").get<std::vector<double>>();
    s.factor = cfg.at("opt_learning_rate_decay_factor").get<double>();
    log.emplace_back(keys::kOptBaseLearningRate, s.base_lr);
    log.emplace_back(keys::kOptWeightDecay, o.weight_decay);
    log.emplace_back(keys::kOptMomentum, o.momentum);
    log.emplace_back(keys::kOptLearningRateWarmupEpochs, s.warmup_epochs);
    // The 0.7.0 checker's SGD rows (closed_resnet_sgd) name the schedule with sgd_opt_* keys.
    log.emplace_back(keys::kSgdOptBaseLearningRate, s.base_lr);
    log.emplace_back(keys::kSgdOptEndLearningRate, s.end_lr);
    log.emplace_back(keys::kSgdOptLearningRateDecayPolyPower, s.poly_power);
    log.emplace_back(keys::kSgdOptLearningRateDecaySteps, decay_steps);
    log.emplace_back(keys::kSgdOptWeightDecay, o.weight_decay);
    log.emplace_back(keys::kSgdOptMomentum, o.momentum);
    if (s.decay == "step") {
      log.emplace_back(keys::kOptLearningRateDecayBoundaryEpochs, s.boundary_epochs);
      log.emplace_back(keys::kOptLearningRateDecayFactor, s.factor);
    } else {
      log.emplace_back(keys::kOptEndLearningRate, s.end_lr);
      log.emplace_back(keys::kOptLearningRateDecaySteps, decay_steps);
      if (s.decay == "poly") log.emplace_back(keys::kOptLearningRateDecayPolyPower, s.poly_power);
    }
  }
  return h;
}

}  // namespace mlpd
