#include <gtest/gtest.h>

#include <cblas.h>

#include <cmath>
#include <string>
#include <vector>

#include "../kernels/grad_check.h"
#include "core/arena.h"
#include "core/param_store.h"
#include "core/rng.h"
#include "kernels/ops.h"
#include "workloads/resnet/resnet_model.h"

using namespace mlpd;

namespace {

struct Model {
  ParamStore store;
  std::unique_ptr<ResNet> net;
  Arena arena;
  explicit Model(const ResNetSpec& spec, uint64_t seed = 7) {
    openblas_set_num_threads(1);
    net = build_resnet(spec, store);
    finalize_params(store);
    init_resnet(*net, store, seed);
    arena_init(arena, resnet_arena_bytes(*net, spec.max_batch));
  }
};

std::vector<float> random_input(size_t n, uint64_t stream) {
  Rng r{99, stream};
  std::vector<float> v(n);
  for (auto& x : v) x = r.normal();
  return v;
}

ResNetSpec tiny_resnet20() {
  ResNetSpec s;
  s.variant = "resnet20";
  s.blocks_per_stage = 1;
  s.in_h = 8;
  s.in_w = 8;
  s.in_c = 1;
  s.num_classes = 5;
  s.max_batch = 2;
  return s;
}

TEST(ResNet20, ParameterGradientsMatchFiniteDifferencesOnATinyBatch) {
  ResNetSpec spec = tiny_resnet20();
  spec.zero_init_residual_gamma = false;
  Model m(spec);
  const int n = 2;
  auto x = random_input(size_t(n) * 8 * 8, 1);
  std::vector<int32_t> labels{1, 3};
  std::vector<float> dlogits(n * spec.num_classes);
  auto loss = [&] {
    arena_reset(m.arena);
    const float* z = resnet_forward(*m.net, m.store, m.arena, x.data(), n, true);
    return test::added_loss(
        [&](double* l) { softmax_xent(z, labels.data(), n, spec.num_classes, 0.1f, 1.0f, nullptr, l, nullptr); });
  };
  arena_reset(m.arena);
  const float* z = resnet_forward(*m.net, m.store, m.arena, x.data(), n, true);
  softmax_xent(z, labels.data(), n, spec.num_classes, 0.1f, 1.0f, dlogits.data(), nullptr, nullptr);
  std::fill(m.store.grads.begin(), m.store.grads.end(), 0.0f);
  resnet_backward(*m.net, m.store, m.arena, dlogits.data(), n, [](size_t) {});
  // Central differences in float through ~14 layers with batch-norm over as few as 8 rows: the
  // loss bends fast (ReLU kinks, tiny-batch BN), so eps must be small (at 1e-2 the truncation
  // error alone reaches 20%), but at 1e-4 the float rounding of the loss is ~3e-3 of the
  // quotient, and which of the two wins depends on the entry and on the CPU's code generation
  // (-march=native). So each entry is differenced at eps 1e-4, 3e-4 and 1e-3 and must match at
  // least one (5% relative + 2e-3 absolute): a wrong gradient matches none. Three entries per view.
  Rng pick{5, 0};
  int checked = 0, large = 0;
  for (size_t v = 0; v < m.store.views.size(); ++v) {
    const ParamView& pv = m.store.views[v];
    for (int t = 0; t < 3; ++t) {
      const size_t i = pv.offset + size_t(pick.next_u64() % pv.count);
      const double a = m.store.grads[i];
      bool matched = false;
      std::string tried;
      for (const float eps : {1e-4f, 3e-4f, 1e-3f}) {
        const double num = test::central_difference(loss, m.store.params[i], eps);
        matched = matched || std::fabs(a - num) <= 5e-2 * std::max(std::fabs(a), std::fabs(num)) + 2e-3;
        tried += ' ';
        tried += std::to_string(num);
      }
      EXPECT_TRUE(matched) << pv.name << " [" << i - pv.offset << "]: analytic " << a << ", differences" << tried;
      ++checked;
      large += std::fabs(a) > 1e-3;
    }
  }
  EXPECT_GT(checked, 40);
  EXPECT_GT(large, checked / 3) << "most checked gradients should be non-trivial";
}

TEST(ResNet20, BackwardReportsEveryViewOnceInReverseRegistrationOrder) {
  Model m(tiny_resnet20());
  auto x = random_input(2 * 64, 2);
  arena_reset(m.arena);
  resnet_forward(*m.net, m.store, m.arena, x.data(), 2, true);
  std::vector<float> dl(2 * 5, 0.1f);
  std::vector<size_t> order;
  resnet_backward(*m.net, m.store, m.arena, dl.data(), 2, [&](size_t v) { order.push_back(v); });
  ASSERT_EQ(order.size(), m.store.views.size());
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], order.size() - 1 - i);
}

TEST(ResNet20, GradientsAccumulateAcrossCallsAndRunsAreBitwiseDeterministic) {
  ResNetSpec spec = tiny_resnet20();
  Model a(spec), b(spec);
  EXPECT_EQ(params_fingerprint(a.store), params_fingerprint(b.store));
  auto x = random_input(2 * 64, 3);
  std::vector<float> dl(2 * 5);
  for (size_t i = 0; i < dl.size(); ++i) dl[i] = 0.05f * float(int(i % 5) - 2);
  auto step = [&](Model& m) {
    arena_reset(m.arena);
    resnet_forward(*m.net, m.store, m.arena, x.data(), 2, true);
    resnet_backward(*m.net, m.store, m.arena, dl.data(), 2, [](size_t) {});
  };
  step(a);
  step(b);
  EXPECT_EQ(a.store.grads, b.store.grads);
  auto once = a.store.grads;
  step(a);
  double max_err = 0, norm = 0;
  for (size_t i = 0; i < once.size(); ++i) {
    max_err = std::max(max_err, std::fabs(double(a.store.grads[i]) - 2.0 * once[i]));
    norm += double(once[i]) * once[i];
  }
  EXPECT_GT(norm, 0.0);
  EXPECT_LT(max_err, 1e-4);
}

TEST(ResNet20, EvalModeUsesRunningStatsAndTrainModeUpdatesThem) {
  Model m(tiny_resnet20());
  auto x = random_input(2 * 64, 4);
  std::vector<float> state0 = m.store.state;
  arena_reset(m.arena);
  resnet_forward(*m.net, m.store, m.arena, x.data(), 2, false);
  EXPECT_EQ(m.store.state, state0) << "eval must not touch running statistics";
  resnet_forward(*m.net, m.store, m.arena, x.data(), 2, true);
  EXPECT_NE(m.store.state, state0) << "train must update running statistics";
  // eval of one sample does not depend on the other samples of the batch
  const float* z1 = resnet_forward(*m.net, m.store, m.arena, x.data(), 1, false);
  std::vector<float> one(z1, z1 + 5);
  const float* z2 = resnet_forward(*m.net, m.store, m.arena, x.data(), 2, false);
  for (int j = 0; j < 5; ++j) EXPECT_NEAR(one[j], z2[j], 1e-5);
}

TEST(ResNet20, MiniModelHasTheExpectedSizeAndFlops) {
  ResNetSpec spec;  // resnet20, 28x28x1, 10 classes
  spec.max_batch = 1;
  Model m(spec);
  // conv weights 3*3*(1*16 + 6*16*16 + 16*32 + 5*32*32 + 32*64 + 5*64*64) + 1x1 16*32 + 32*64,
  // BN 2*(16*7 + 32*7 + 64*7), fc 64*10+10
  const size_t conv = 9 * (16 + 6 * 256 + 512 + 5 * 1024 + 2048 + 5 * 4096) + 512 + 2048;
  const size_t bn = 2 * (16 * 7 + 32 * 7 + 64 * 7);
  EXPECT_NE(resnet_summary(*m.net).find(std::to_string(conv + bn + 650) + " params"), std::string::npos)
      << resnet_summary(*m.net);
  EXPECT_NEAR(resnet_flops_per_image(*m.net), 2 * 31.9e6, 2 * 1.0e6);
}

TEST(ResNet50, BuildsWithTorchvisionParameterCountAndTrainsOneStep) {
  ResNetSpec spec;
  spec.variant = "resnet50";
  spec.in_h = 224;
  spec.in_w = 224;
  spec.in_c = 3;
  spec.num_classes = 1000;
  spec.max_batch = 2;
  Model m(spec);
  // torchvision resnet50: 25,557,032 trainable parameters (conv, BN gamma/beta, fc); running
  // stats are state, not parameters, exactly as in PyTorch, so the count matches exactly.
  EXPECT_NE(resnet_summary(*m.net).find("25557032 params"), std::string::npos) << resnet_summary(*m.net);
  EXPECT_NEAR(resnet_flops_per_image(*m.net), 8.2e9, 0.3e9);  // 4.1 GMACs
  auto x = random_input(size_t(2) * 224 * 224 * 3, 5);
  arena_reset(m.arena);
  const float* z = resnet_forward(*m.net, m.store, m.arena, x.data(), 2, true);
  std::vector<int32_t> labels{3, 999};
  std::vector<float> dl(2 * 1000);
  double loss = 0.0;
  softmax_xent(z, labels.data(), 2, 1000, 0.1f, 0.5f, dl.data(), &loss, nullptr);
  EXPECT_TRUE(std::isfinite(loss));
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(std::isfinite(z[i]));
  size_t calls = 0;
  resnet_backward(*m.net, m.store, m.arena, dl.data(), 2, [&](size_t) { ++calls; });
  EXPECT_EQ(calls, m.store.views.size());
  for (const ParamView& v : m.store.views) {
    double s = 0;
    bool finite = true;
    for (size_t i = 0; i < v.count; ++i) {
      const float g = m.store.grads[v.offset + i];
      finite = finite && std::isfinite(g);
      s += double(g) * g;
    }
    EXPECT_TRUE(finite) << v.name;
    EXPECT_GT(s, 0.0) << v.name << " has an all-zero gradient";
  }
}

}  // namespace
