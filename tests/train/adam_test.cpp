// Adam and LazyAdam through the optimizer interface the trainer uses: moments allocated once at
// init, bias correction by step count, lazy updates confined to *_embedding views, and the
// hyperparameters read from an ncf config (constant LR, MLPerf keys logged).
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "core/check.h"

#include "core/param_store.h"
#include "mlperf/keys.h"
#include "train/hyperparams.h"
#include "train/optimizer.h"

using namespace mlpd;

namespace {

ParamStore make_store() {
  ParamStore s;
  add_param(s, "user_embedding", 8, ParamKind::weight);
  add_param(s, "dense.weight", 4, ParamKind::weight);
  finalize_params(s);
  for (size_t i = 0; i < s.params.size(); ++i) s.params[i] = 0.1f * static_cast<float>(i % 7);
  return s;
}

TEST(AdamOptimizer, FirstStepMovesEachParameterByLr) {
  ParamStore s = make_store();
  Optimizer o;
  o.name = "adam";
  init_optimizer(o, s);
  ASSERT_EQ(o.second_moment.size(), s.params.size());
  const auto p0 = s.params;
  for (size_t i = 0; i < s.grads.size(); ++i) s.grads[i] = (i % 2 ? 1.0f : -3.0f);
  optimizer_step(o, s, 0.01f);
  // Step 1 with bias correction: m_hat = g, v_hat = g^2, so the step is lr * sign(g).
  for (const ParamView& v : s.views)
    for (size_t i = v.offset; i < v.offset + v.count; ++i)
      EXPECT_NEAR(s.params[i], p0[i] - 0.01f * (s.grads[i] > 0 ? 1.0f : -1.0f), 1e-6);
  EXPECT_EQ(o.steps, 1);
}

TEST(AdamOptimizer, LazyTouchesOnlyNonZeroEmbeddingGradientsDenseViewsAsAdam) {
  ParamStore a = make_store(), l = make_store();
  Optimizer oa, ol;
  oa.name = "adam";
  ol.name = "lazy_adam";
  init_optimizer(oa, a);
  init_optimizer(ol, l);
  for (int step = 0; step < 3; ++step) {
    for (ParamStore* s : {&a, &l}) {
      std::fill(s->grads.begin(), s->grads.end(), 0.0f);
      for (size_t i = 0; i < s->grads.size(); ++i) s->grads[i] = 0.5f - 0.1f * static_cast<float>(i % 5);
      // Embedding elements 0..3 (a row) are touched on the first step only.
      if (step > 0)
        for (size_t i = 0; i < 4; ++i) s->grads[s->views[0].offset + i] = 0.0f;
      // A dense element with zero gradient: Adam moves it by momentum in both optimizers.
      if (step > 0) s->grads[s->views[1].offset] = 0.0f;
    }
    optimizer_step(oa, a, 0.01f);
    optimizer_step(ol, l, 0.01f);
  }
  const size_t e = a.views[0].offset, dv = a.views[1].offset;
  for (size_t i = 0; i < 4; ++i) EXPECT_NE(a.params[e + i], l.params[e + i]) << "lazy row should have stayed";
  for (size_t i = 4; i < 8; ++i) EXPECT_FLOAT_EQ(a.params[e + i], l.params[e + i]);
  for (size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(a.params[dv + i], l.params[dv + i]) << "dense view must be plain Adam";
}

TEST(AdamOptimizer, HyperparamsFromNcfConfig) {
  nlohmann::json cfg = {{"opt_name", "adam"},          {"opt_base_learning_rate", 0.0005},
                        {"opt_adam_beta_1", 0.9},      {"opt_adam_beta_2", 0.999},
                        {"opt_adam_epsilon", 1e-8}};
  Hyperparams h = read_hyperparams(cfg);
  h.schedule.steps_per_epoch = 100;
  EXPECT_EQ(h.optimizer.name, "adam");
  EXPECT_FLOAT_EQ(h.optimizer.beta2, 0.999f);
  for (int64_t step : {0, 50, 1000, 100000}) EXPECT_DOUBLE_EQ(lr_at(h.schedule, step), 0.0005);
  bool has_eps = false;
  for (const auto& [k, v] : hyperparam_log_entries(h))
    if (k == keys::kOptAdamEpsilon) has_eps = v.get<double>() == 1e-8;
  EXPECT_TRUE(has_eps);
  cfg["opt_adam_beta_2"] = 1.0;
  EXPECT_THROW(read_hyperparams(cfg), std::exception);
}

}  // namespace

namespace {

// gnmt and transformer: the schedule keys, read and logged under closed_gnmt.yaml's names.
TEST(AdamOptimizer, HyperparamsWithGnmtAndInverseSqrtSchedules) {
  nlohmann::json cfg = {{"opt_name", "adam"}, {"opt_base_learning_rate", 0.002}, {"opt_adam_beta_1", 0.9},
                        {"opt_adam_beta_2", 0.999}, {"opt_adam_epsilon", 1e-8}, {"lr_schedule", "gnmt"},
                        {"opt_learning_rate_warmup_steps", 200}, {"opt_learning_rate_remain_steps", 1500},
                        {"opt_learning_rate_decay_interval", 200}, {"opt_learning_rate_decay_steps", 4},
                        {"opt_learning_rate_decay_factor", 0.5}, {"grad_clip_norm", 5.0}};
  Hyperparams h = read_hyperparams(cfg);
  EXPECT_EQ(h.schedule.decay, "gnmt");
  EXPECT_FLOAT_EQ(h.optimizer.clip_norm, 5.0f);
  EXPECT_DOUBLE_EQ(lr_at(h.schedule, 1500), 0.001);
  std::set<std::string> logged;
  for (const auto& [k, v] : hyperparam_log_entries(h)) logged.insert(k);
  for (const char* k : {keys::kOptLearningRateWarmupSteps, keys::kOptLearningRateRemainSteps,
                        keys::kOptLearningRateDecayInterval, keys::kOptLearningRateDecaySteps,
                        keys::kOptLearningRateDecayFactor, keys::kOptLearningRateAltDecayFunc,
                        keys::kOptLearningRateAltWarmupFunc})
    EXPECT_TRUE(logged.count(k)) << k;
  cfg["opt_learning_rate_decay_interval"] = 0;
  EXPECT_THROW(read_hyperparams(cfg), UserError);
  cfg["opt_learning_rate_decay_interval"] = 200;
  cfg["lr_schedule"] = "cosine";
  EXPECT_THROW(read_hyperparams(cfg), UserError);
  cfg["lr_schedule"] = "inverse_sqrt";
  h = read_hyperparams(cfg);
  EXPECT_DOUBLE_EQ(lr_at(h.schedule, 199), 0.002);
  logged.clear();
  for (const auto& [k, v] : hyperparam_log_entries(h)) logged.insert(k);
  EXPECT_TRUE(logged.count(keys::kOptLearningRateWarmupSteps));
  EXPECT_FALSE(logged.count(keys::kOptLearningRateRemainSteps));
  cfg["grad_clip_norm"] = -1.0;
  EXPECT_THROW(read_hyperparams(cfg), UserError);
}

}  // namespace
