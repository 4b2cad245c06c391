#include "train/hyperparams.h"

#include <cmath>

#include "core/check.h"
#include "mlperf/keys.h"

namespace mlpd {

using namespace keys;

namespace {

int64_t non_negative_steps(const nlohmann::json& cfg, const char* key) {
  const int64_t v = cfg.at(key).get<int64_t>();
  if (v < 0) throw UserError(std::string(key) + " must be >= 0", 2);
  return v;
}

// Adam's schedule (key lr_schedule, absent in ncf): constant, inverse_sqrt (transformer) or gnmt.
void read_adam_schedule(const nlohmann::json& cfg, LrSchedule& s) {
  if (!cfg.contains(kAdamLrSchedule)) return;
  const auto name = cfg.at(kAdamLrSchedule).get<std::string>();
  if (name == "constant") return;
  if (name != "inverse_sqrt" && name != "gnmt")
    throw UserError("lr_schedule = " + name + ": use constant, inverse_sqrt or gnmt", 2);
  s.decay = name;
  s.warmup_steps = non_negative_steps(cfg, kOptLearningRateWarmupSteps);
  if (name == "gnmt") {
    s.remain_steps = non_negative_steps(cfg, kOptLearningRateRemainSteps);
    s.decay_interval = non_negative_steps(cfg, kOptLearningRateDecayInterval);
    s.decay_count = non_negative_steps(cfg, kOptLearningRateDecaySteps);
    s.factor = cfg.at(kOptLearningRateDecayFactor).get<double>();
    if (s.decay_interval < 1) throw UserError("opt_learning_rate_decay_interval must be >= 1", 2);
    if (!(s.factor > 0.0 && s.factor <= 1.0)) throw UserError("opt_learning_rate_decay_factor must lie in (0, 1]", 2);
  }
}

}  // namespace

Hyperparams read_hyperparams(const nlohmann::json& cfg) {
  Hyperparams h;
  if (cfg.contains(kGradClipNorm)) {
    h.optimizer.clip_norm = cfg.at(kGradClipNorm).get<float>();
    if (!(h.optimizer.clip_norm >= 0.0f)) throw UserError("grad_clip_norm must be >= 0 (0: no clipping)", 2);
  }
  Optimizer& o = h.optimizer;
  LrSchedule& s = h.schedule;
  o.name = cfg.at(kOptName).get<std::string>();
  if (o.name == kAdam || o.name == kLazyAdam) {
    // MLPerf v0.5 NCF: Adam at a constant learning rate; LR and the three Adam constants tunable.
    h.adam_beta1 = cfg.at(kOptAdamBeta1).get<double>();
    h.adam_beta2 = cfg.at(kOptAdamBeta2).get<double>();
    h.adam_epsilon = cfg.at(kOptAdamEpsilon).get<double>();
    o.beta1 = cfg.at(kOptAdamBeta1).get<float>();
    o.beta2 = cfg.at(kOptAdamBeta2).get<float>();
    o.epsilon = cfg.at(kOptAdamEpsilon).get<float>();
    o.momentum = 0.0f;
    o.weight_decay = 0.0f;
    s.decay = "step";  // no boundaries, no warmup: constant
    s.base_lr = cfg.at(kOptBaseLearningRate).get<double>();
    s.warmup_epochs = 0.0;
    s.boundary_epochs.clear();
    if (!(s.base_lr > 0.0)) throw UserError("opt_base_learning_rate must be positive", 2);
    read_adam_schedule(cfg, s);
    if (!(o.beta1 >= 0.0f && o.beta1 < 1.0f && o.beta2 >= 0.0f && o.beta2 < 1.0f))
      throw UserError("opt_adam_beta_1 and opt_adam_beta_2 must lie in [0, 1)", 2);
    if (!(o.epsilon > 0.0f)) throw UserError("opt_adam_epsilon must be positive", 2);
    return h;
  }
  if (o.name == kLars) {
    s.decay_epochs = cfg.at(kLrDecayEpochs).get<double>();
    // MLPerf's LARS schedule is fixed: warmup then polynomial decay.
    o.momentum = cfg.at(kLarsOptMomentum).get<float>();
    o.weight_decay = cfg.at(kLarsOptWeightDecay).get<float>();
    o.lars_epsilon = cfg.at(kLarsEpsilon).get<float>();
    o.lars_eta = cfg.at(kLarsOptTrustCoefficient).get<float>();
    s.decay = "poly";
    s.base_lr = cfg.at(kLarsOptBaseLearningRate).get<double>();
    s.end_lr = cfg.at(kLarsOptEndLearningRate).get<double>();
    s.poly_power = cfg.at(kLarsOptLearningRateDecayPolyPower).get<double>();
    s.warmup_epochs = cfg.at(kLarsOptLearningRateWarmupEpochs).get<double>();
  } else {
    o.momentum = cfg.at(kOptMomentum).get<float>();
    o.weight_decay = cfg.at(kOptWeightDecay).get<float>();
    s.decay = cfg.at(kLrDecay).get<std::string>();
    if (s.decay != "poly" && s.decay != "cosine" && s.decay != "step" && s.decay != "ssd" && s.decay != "maskrcnn")
      throw UserError("lr_decay = " + s.decay + ": use poly, cosine, step, ssd or maskrcnn", 2);
    s.base_lr = cfg.at(kOptBaseLearningRate).get<double>();
    if (s.decay == "ssd") {
      // MLPerf's SSD: warmup in steps with an integer factor, then step decay at epoch boundaries.
      s.warmup_steps = non_negative_steps(cfg, kOptLearningRateWarmupSteps);
      s.warmup_factor = cfg.at(kOptLearningRateWarmupFactor).get<double>();
      s.boundary_epochs = cfg.at(kOptLearningRateDecayBoundaryEpochs).get<std::vector<double>>();
      s.factor = cfg.at(kOptLearningRateDecayFactor).get<double>();
      if (!(s.warmup_factor >= 0.0)) throw UserError("opt_learning_rate_warmup_factor must be >= 0", 2);
      return h;
    }
    if (s.decay == "maskrcnn") {
      // MLPerf's Mask R-CNN: linear warmup from warmup_factor * base_lr, then decays at steps.
      s.warmup_steps = non_negative_steps(cfg, kOptLearningRateWarmupSteps);
      s.warmup_factor = cfg.at(kOptLearningRateWarmupFactor).get<double>();
      s.boundary_steps = cfg.at(kOptLearningRateDecaySteps).get<std::vector<int64_t>>();
      s.factor = cfg.at(kOptLearningRateDecayFactor).get<double>();
      if (!(s.warmup_factor >= 0.0 && s.warmup_factor <= 1.0))
        throw UserError("opt_learning_rate_warmup_factor must lie in [0, 1]", 2);
      for (size_t i = 0; i < s.boundary_steps.size(); ++i)
        if (s.boundary_steps[i] < 0 || (i > 0 && s.boundary_steps[i] <= s.boundary_steps[i - 1]))
          throw UserError("opt_learning_rate_decay_steps must be increasing steps >= 0", 2);
      return h;
    }
    s.decay_epochs = cfg.at(kLrDecayEpochs).get<double>();
    s.end_lr = cfg.at(kOptEndLearningRate).get<double>();
    s.poly_power = cfg.at(kOptLearningRateDecayPolyPower).get<double>();
    s.warmup_epochs = cfg.at(kOptLearningRateWarmupEpochs).get<double>();
    s.boundary_epochs = cfg.at(kOptLearningRateDecayBoundaryEpochs).get<std::vector<double>>();
    s.factor = cfg.at(kOptLearningRateDecayFactor).get<double>();
  }
  return h;
}

std::vector<std::pair<std::string, nlohmann::json>> hyperparam_log_entries(const Hyperparams& h) {
  const Optimizer& o = h.optimizer;
  const LrSchedule& s = h.schedule;
  std::vector<std::pair<std::string, nlohmann::json>> log;
  log.emplace_back(kOptName, o.name);
  if (o.name == kAdam || o.name == kLazyAdam) {
    log.emplace_back(kOptBaseLearningRate, s.base_lr);
    log.emplace_back(kOptAdamBeta1, h.adam_beta1);
    log.emplace_back(kOptAdamBeta2, h.adam_beta2);
    log.emplace_back(kOptAdamEpsilon, h.adam_epsilon);
    if (s.decay == "inverse_sqrt" || s.decay == "gnmt") log.emplace_back(kOptLearningRateWarmupSteps, s.warmup_steps);
    if (s.decay == "gnmt") {
      log.emplace_back(kOptLearningRateRemainSteps, s.remain_steps);
      log.emplace_back(kOptLearningRateDecayInterval, s.decay_interval);
      log.emplace_back(kOptLearningRateDecaySteps, s.decay_count);
      log.emplace_back(kOptLearningRateDecayFactor, s.factor);
      log.emplace_back(kOptLearningRateAltDecayFunc, true);
      log.emplace_back(kOptLearningRateAltWarmupFunc, true);
    }
    return log;
  }
  const int64_t decay_steps = static_cast<int64_t>(std::llround(s.decay_epochs * static_cast<double>(s.steps_per_epoch)));
  if (o.name == kLars) {
    log.emplace_back(kLarsOptBaseLearningRate, s.base_lr);
    log.emplace_back(kLarsOptEndLearningRate, s.end_lr);
    log.emplace_back(kLarsOptLearningRateDecayPolyPower, s.poly_power);
    log.emplace_back(kLarsOptLearningRateDecaySteps, decay_steps);
    log.emplace_back(kLarsOptLearningRateWarmupEpochs, s.warmup_epochs);
    log.emplace_back(kLarsOptMomentum, o.momentum);
    log.emplace_back(kLarsOptWeightDecay, o.weight_decay);
    log.emplace_back(kLarsEpsilon, o.lars_epsilon);
    return log;
  }
  log.emplace_back(kOptBaseLearningRate, s.base_lr);
  log.emplace_back(kOptWeightDecay, o.weight_decay);
  log.emplace_back(kOptMomentum, o.momentum);
  if (s.decay == "ssd") {  // closed_ssd.yaml's keys
    log.emplace_back(kOptLearningRateWarmupSteps, s.warmup_steps);
    log.emplace_back(kOptLearningRateWarmupFactor, s.warmup_factor);
    log.emplace_back(kOptLearningRateDecayBoundaryEpochs, s.boundary_epochs);
    log.emplace_back(kOptLearningRateDecayFactor, s.factor);
    return log;
  }
  if (s.decay == "maskrcnn") {  // closed_maskrcnn.yaml's keys
    log.emplace_back(kOptLearningRateWarmupSteps, s.warmup_steps);
    log.emplace_back(kOptLearningRateWarmupFactor, s.warmup_factor);
    log.emplace_back(kOptLearningRateDecaySteps, s.boundary_steps);
    log.emplace_back(kOptLearningRateDecayFactor, s.factor);
    return log;
  }
  log.emplace_back(kOptLearningRateWarmupEpochs, s.warmup_epochs);
  // The 0.7.0 checker's SGD rows (closed_resnet_sgd) name the schedule with sgd_opt_* keys.
  log.emplace_back(kSgdOptBaseLearningRate, s.base_lr);
  log.emplace_back(kSgdOptEndLearningRate, s.end_lr);
  log.emplace_back(kSgdOptLearningRateDecayPolyPower, s.poly_power);
  log.emplace_back(kSgdOptLearningRateDecaySteps, decay_steps);
  log.emplace_back(kSgdOptWeightDecay, o.weight_decay);
  log.emplace_back(kSgdOptMomentum, o.momentum);
  if (s.decay == "step") {
    log.emplace_back(kOptLearningRateDecayBoundaryEpochs, s.boundary_epochs);
    log.emplace_back(kOptLearningRateDecayFactor, s.factor);
  } else {
    log.emplace_back(kOptEndLearningRate, s.end_lr);
    log.emplace_back(kOptLearningRateDecaySteps, decay_steps);
    if (s.decay == "poly") log.emplace_back(kOptLearningRateDecayPolyPower, s.poly_power);
  }
  return log;
}

}  // namespace mlpd
