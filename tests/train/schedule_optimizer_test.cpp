#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/op_table.h"
#include "train/lr_schedule.h"
#include "train/optimizer.h"

using namespace mlpd;

TEST(LrSchedule, WarmupRisesLinearlyToBase) {
  LrSchedule s;
  s.base_lr = 0.4;
  s.warmup_epochs = 2;
  s.steps_per_epoch = 10;
  s.decay_epochs = 10;
  EXPECT_DOUBLE_EQ(lr_at(s, 0), 0.02);
  EXPECT_DOUBLE_EQ(lr_at(s, 19), 0.4);
  EXPECT_NEAR(lr_at(s, 20), 0.4, 1e-12);  // decay starts at the top
}

TEST(LrSchedule, CosineAndPolyEndAtEndLr) {
  LrSchedule s;
  s.base_lr = 1.0;
  s.end_lr = 0.001;
  s.steps_per_epoch = 100;
  s.decay_epochs = 3;
  EXPECT_NEAR(lr_at(s, 300), 0.001, 1e-12);
  EXPECT_NEAR(lr_at(s, 150), 0.5005, 1e-9);
  s.decay = "poly";
  s.poly_power = 2;
  EXPECT_NEAR(lr_at(s, 150), 0.001 + 0.999 * 0.25, 1e-9);
  EXPECT_NEAR(lr_at(s, 1000), 0.001, 1e-12);
}

TEST(LrSchedule, StepDecayAtBoundaries) {
  LrSchedule s;
  s.decay = "step";
  s.base_lr = 1.0;
  s.boundary_epochs = {2, 4};
  s.factor = 0.1;
  s.steps_per_epoch = 10;
  EXPECT_DOUBLE_EQ(lr_at(s, 19), 1.0);
  EXPECT_NEAR(lr_at(s, 20), 0.1, 1e-12);
  EXPECT_NEAR(lr_at(s, 45), 0.01, 1e-12);
}

TEST(LrSchedule, SsdWarmupWithFactorThenStepsAtEpochs) {
  LrSchedule s;
  s.decay = "ssd";
  s.base_lr = 0.8;
  s.warmup_steps = 100;
  s.warmup_factor = 0;
  s.boundary_epochs = {4, 5};
  s.factor = 0.1;
  s.steps_per_epoch = 50;
  // factor 0: from 0 at step 0 linearly to base at warmup_steps (MLPerf SSD reference).
  EXPECT_DOUBLE_EQ(lr_at(s, 0), 0.0);
  EXPECT_DOUBLE_EQ(lr_at(s, 50), 0.4);
  EXPECT_DOUBLE_EQ(lr_at(s, 100), 0.8);
  EXPECT_DOUBLE_EQ(lr_at(s, 199), 0.8);
  EXPECT_NEAR(lr_at(s, 200), 0.08, 1e-12);
  EXPECT_NEAR(lr_at(s, 250), 0.008, 1e-12);
  // factor 1: starts at half the base, the drop spread over the warmup.
  s.warmup_factor = 1;
  EXPECT_DOUBLE_EQ(lr_at(s, 0), 0.4);
  EXPECT_DOUBLE_EQ(lr_at(s, 50), 0.6);
}

TEST(LrSchedule, MaskrcnnLinearWarmupFromFactorThenStepsAtSteps) {
  LrSchedule s;
  s.decay = "maskrcnn";
  s.base_lr = 0.06;
  s.warmup_steps = 100;
  s.warmup_factor = 0.25;
  s.boundary_steps = {300, 400};
  s.factor = 0.1;
  s.steps_per_epoch = 7;  // unused: every boundary is in steps
  // maskrcnn-benchmark's linear warmup: factor * (1 - t/w) + t/w of the base.
  EXPECT_DOUBLE_EQ(lr_at(s, 0), 0.015);
  EXPECT_NEAR(lr_at(s, 50), 0.06 * (0.25 * 0.5 + 0.5), 1e-15);
  EXPECT_DOUBLE_EQ(lr_at(s, 100), 0.06);
  EXPECT_DOUBLE_EQ(lr_at(s, 299), 0.06);
  EXPECT_NEAR(lr_at(s, 300), 0.006, 1e-15);
  EXPECT_NEAR(lr_at(s, 400), 0.0006, 1e-15);
}

TEST(Optimizer, SgdMomentumMatchesHandComputedSteps) {
  ParamStore s;
  add_param(s, "w", 1, ParamKind::weight);
  add_param(s, "b", 1, ParamKind::bias);
  finalize_params(s);
  s.params[0] = 1.0f;
  s.params[16] = 1.0f;
  Optimizer opt;
  opt.weight_decay = 0.1f;
  opt.momentum = 0.5f;
  init_optimizer(opt, s);
  s.grads[0] = 2.0f;
  s.grads[16] = 2.0f;
  optimizer_step(opt, s, 0.1f);
  EXPECT_FLOAT_EQ(s.params[0], 1.0f - 0.1f * 2.1f);   // decay applies to weights
  EXPECT_FLOAT_EQ(s.params[16], 1.0f - 0.1f * 2.0f);  // not to biases
  optimizer_step(opt, s, 0.1f);
  float g2 = 2.0f + 0.1f * (1.0f - 0.21f);
  EXPECT_FLOAT_EQ(s.params[0], (1.0f - 0.21f) - 0.1f * (0.5f * 2.1f + g2));
}

TEST(Optimizer, LarsScalesByTrustRatio) {
  ParamStore s;
  add_param(s, "w", 2, ParamKind::weight);
  finalize_params(s);
  s.params[0] = 3.0f;
  s.params[1] = 4.0f;  // ||p|| = 5
  s.grads[0] = 0.6f;
  s.grads[1] = 0.8f;   // ||g|| = 1
  Optimizer opt;
  opt.name = "lars";
  opt.momentum = 0.9f;
  opt.weight_decay = 0.0f;
  opt.lars_eta = 0.001f;
  init_optimizer(opt, s);
  optimizer_step(opt, s, 1.0f);
  // trust = 0.001*5/1 = 0.005; update = 0.005 * g
  EXPECT_NEAR(s.params[0], 3.0f - 0.005f * 0.6f, 1e-7);
  EXPECT_NEAR(s.params[1], 4.0f - 0.005f * 0.8f, 1e-7);
}

// The op reports the trust ratio it applied where asked (1 for a view that skips trust and decay),
// and without a place for it updates the same bits.
TEST(Optimizer, LarsOpWritesTheTrustItApplied) {
  const OpTable& o = cpu_ops();
  for (const bool skip : {false, true}) {
    std::vector<float> p{3.0f, 4.0f}, g{0.6f, 0.8f}, m{0.0f, 0.0f};
    std::vector<float> p2 = p, m2 = m;
    float trust = -1.0f;
    o.lars_update(p.data(), g.data(), m.data(), 2, 1.0f, 0.9f, 0.0f, 0.001f, 0.0f, skip, &trust);
    o.lars_update(p2.data(), g.data(), m2.data(), 2, 1.0f, 0.9f, 0.0f, 0.001f, 0.0f, skip, nullptr);
    EXPECT_FLOAT_EQ(trust, skip ? 1.0f : 0.005f) << "skip " << skip;  // 0.001 * ||p|| 5 / ||g|| 1
    EXPECT_EQ(p, p2);
    EXPECT_EQ(m, m2);
  }
}

// fairseq's inverse_sqrt: linear to base_lr at warmup_steps, then base_lr * sqrt(warmup / t).
TEST(LrSchedule, InverseSqrtWarmsUpThenDecays) {
  LrSchedule s;
  s.decay = "inverse_sqrt";
  s.base_lr = 0.001;
  s.warmup_steps = 400;
  EXPECT_DOUBLE_EQ(lr_at(s, 0), 0.001 / 400);
  EXPECT_DOUBLE_EQ(lr_at(s, 199), 0.0005);
  EXPECT_DOUBLE_EQ(lr_at(s, 399), 0.001);
  EXPECT_NEAR(lr_at(s, 1599), 0.0005, 1e-15);  // sqrt(400 / 1600)
}

// MLPerf's GNMT: 0.01 * base at step 0 rising exponentially to base at warmup_steps, constant to
// remain_steps, then one factor per decay_interval, at most decay_count times.
TEST(LrSchedule, GnmtWarmupRemainAndDecays) {
  LrSchedule s;
  s.decay = "gnmt";
  s.base_lr = 0.002;
  s.warmup_steps = 100;
  s.remain_steps = 1000;
  s.decay_interval = 50;
  s.decay_count = 3;
  s.factor = 0.5;
  EXPECT_NEAR(lr_at(s, 0), 0.00002, 1e-15);
  EXPECT_NEAR(lr_at(s, 50), 0.0002, 1e-15);  // halfway in log space: base * 0.01^0.5
  EXPECT_DOUBLE_EQ(lr_at(s, 100), 0.002);
  EXPECT_DOUBLE_EQ(lr_at(s, 999), 0.002);
  EXPECT_DOUBLE_EQ(lr_at(s, 1000), 0.001);
  EXPECT_DOUBLE_EQ(lr_at(s, 1049), 0.001);
  EXPECT_DOUBLE_EQ(lr_at(s, 1050), 0.0005);
  EXPECT_DOUBLE_EQ(lr_at(s, 1100), 0.00025);
  EXPECT_DOUBLE_EQ(lr_at(s, 100000), 0.00025);  // no more than decay_count decays
}

// Clipping scales the whole gradient to the norm when it is larger, and leaves it alone when not.
TEST(Optimizer, ClipNormScalesTheGlobalGradient) {
  for (const float clip : {1.0f, 100.0f}) {
    ParamStore s;
    add_param(s, "a", 2, ParamKind::weight);
    add_param(s, "b", 1, ParamKind::bias);
    finalize_params(s);
    Optimizer o;
    o.name = "sgd";
    o.momentum = 0.0f;
    o.clip_norm = clip;
    init_optimizer(o, s);
    const float g[3] = {3.0f, 0.0f, 4.0f};  // norm 5
    s.grads[s.views[0].offset] = g[0];
    s.grads[s.views[0].offset + 1] = g[1];
    s.grads[s.views[1].offset] = g[2];
    optimizer_step(o, s, 1.0f);
    const float scale = clip < 5.0f ? clip / 5.0f : 1.0f;
    EXPECT_FLOAT_EQ(s.params[s.views[0].offset], -g[0] * scale);
    EXPECT_FLOAT_EQ(s.params[s.views[1].offset], -g[2] * scale);
  }
}
