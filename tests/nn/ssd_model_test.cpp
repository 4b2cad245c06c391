// The SSD network (src/workloads/ssd/ssd_model.h): priors, output layout, and its backward against
// finite differences of a linear function of its outputs (so the test checks the network alone; the
// multibox loss has its own tests in tests/kernels).
#include <gtest/gtest.h>

#include <cblas.h>

#include <cmath>
#include <vector>

#include "model_grad_check.h"
#include "core/arena.h"
#include "core/param_store.h"
#include "core/rng.h"
#include "kernels/ops.h"
#include "workloads/ssd/ssd_model.h"

using namespace mlpd;

namespace {

// A small architecture with every kind of part: a strided stem with max pool, a stage with a
// projection and one without, two extras (one strided, one valid-padded), aspect ratios 2 and 3.
SsdSpec tiny_spec(int size = 16) {
  SsdSpec s;
  s.variant = "tiny";
  s.in_h = s.in_w = size;
  s.in_c = 1;
  s.classes = 3;
  s.stem_channels = 4;
  s.stem_kernel = 3;
  s.stem_stride = 1;
  s.stem_maxpool = true;  // halves the map
  s.stages = {{4, 1, 1}, {6, 1, 2}};  // identity shortcut, then a projection
  s.extras = {{3, 5, 2, 1}, {3, 4, 1, 1}};  // at 16x16: maps 4, 2, 2
  s.maps = {{0.2, 0.4, {2.0}}, {0.4, 0.6, {2.0, 3.0}}, {0.6, 0.8, {}}};
  s.max_batch = 2;
  return s;
}

struct Model {
  ParamStore store;
  std::unique_ptr<Ssd> net;
  Arena arena;
  explicit Model(const SsdSpec& spec) {
    openblas_set_num_threads(1);
    net = build_ssd(spec, store);
    finalize_params(store);
    init_ssd(*net, store, 11);
    arena_init(arena, ssd_arena_bytes(*net, spec.max_batch));
  }
};

}  // namespace

TEST(SsdModel, PriorsFollowTheMapsAndAspectRatios) {
  Model m(tiny_spec());
  // 4x4 map, 4 boxes per cell; 2x2, 6 per cell; 2x2, 2 per cell.
  EXPECT_EQ(ssd_num_priors(*m.net), 16 * 4 + 4 * 6 + 4 * 2);
  const std::vector<float>& p = ssd_priors(*m.net);
  ASSERT_EQ(p.size(), size_t(ssd_num_priors(*m.net)) * 4);
  // First cell of the first map: centre (1/8, 1/8), (s, s), (s', s'), then ratio 2 and its transpose.
  EXPECT_FLOAT_EQ(p[0], 0.125f);
  EXPECT_FLOAT_EQ(p[1], 0.125f);
  EXPECT_FLOAT_EQ(p[2], 0.2f);
  EXPECT_FLOAT_EQ(p[3], 0.2f);
  EXPECT_NEAR(p[6], std::sqrt(0.2 * 0.4), 1e-6);
  EXPECT_NEAR(p[10], 0.2 * std::sqrt(2.0), 1e-6);
  EXPECT_NEAR(p[11], 0.2 / std::sqrt(2.0), 1e-6);
  EXPECT_NEAR(p[14], 0.2 / std::sqrt(2.0), 1e-6);
  EXPECT_NEAR(p[15], 0.2 * std::sqrt(2.0), 1e-6);
  // Second cell: one step right.
  EXPECT_FLOAT_EQ(p[16], 0.375f);
  for (float v : p) {
    EXPECT_GE(v, 0.0f);
    EXPECT_LE(v, 1.0f);
  }
}

TEST(SsdModel, NamedArchitecturesBuild) {
  for (const char* v : {"ssd_mini", "ssd300"}) {
    const int size = std::string(v) == "ssd300" ? 300 : 96;
    SsdSpec spec = ssd_spec(v, size, size, std::string(v) == "ssd300" ? 3 : 1, 11, 1);
    ParamStore store;
    auto net = build_ssd(spec, store);
    EXPECT_EQ(ssd_num_priors(*net), std::string(v) == "ssd300" ? 8732 : 846) << v;
  }
  EXPECT_THROW(ssd_spec("ssd512", 96, 96, 1, 11, 1), std::exception);
}

TEST(SsdModel, GradientsMatchFiniteDifferencesOfALinearReadout) {
  // 24x24: the last map is 3x3, so its batch norm sees 18 rows (at 2x2 an all-equal channel sits
  // exactly on the ReLU's kink, where no finite difference agrees with any subgradient).
  const SsdSpec spec = tiny_spec(24);
  Model m(spec);
  const int n = 2, P = ssd_num_priors(*m.net), C = spec.classes;
  Rng r{3, 1};
  std::vector<float> x(size_t(n) * 24 * 24);
  for (auto& v : x) v = r.normal();
  std::vector<float> wc(size_t(n) * P * C), wl(size_t(n) * P * 4);
  for (auto& v : wc) v = r.normal();
  for (auto& v : wl) v = r.normal();
  auto readout = [&] {
    arena_reset(m.arena);
    const SsdOutputs o = ssd_forward(*m.net, m.store, m.arena, x.data(), n, true);
    return test::dot(o.conf, wc.data(), wc.size()) + test::dot(o.loc, wl.data(), wl.size());
  };
  readout();
  std::fill(m.store.grads.begin(), m.store.grads.end(), 0.0f);
  std::vector<size_t> order;
  ssd_backward(*m.net, m.store, m.arena, wc.data(), wl.data(), n, [&](size_t v) { order.push_back(v); });
  test::expect_reverse_view_order(m.store, order);
  test::expect_view_grads_match(m.store, readout);
}


// The reference architecture runs a training step at batch 2 (300x300x3, 81 classes) with the real
// target assignment and multibox loss: a finite loss, and a gradient in every view.
TEST(SsdModel, Ssd300RunsATrainingStepOnABatchOfTwo) {
  openblas_set_num_threads(2);
  const SsdSpec spec = ssd_spec("ssd300", 300, 300, 3, 81, 2);
  Model m(spec);
  const int n = 2, P = ssd_num_priors(*m.net);
  Rng r{6, 1};
  std::vector<float> x(size_t(n) * 300 * 300 * 3);
  for (auto& v : x) v = r.normal();
  // In each image, boxes of the six maps' scales (0.07 to 0.9), so every head has positives and
  // every view a gradient (x1, y1, x2, y2, normalized).
  std::vector<float> boxes;
  std::vector<int32_t> labels, first = {0};
  for (int i = 0; i < n; ++i) {
    for (float size : {0.08f, 0.16f, 0.33f, 0.5f, 0.7f, 0.92f}) {
      const float c = 0.5f + 0.02f * float(i);
      boxes.insert(boxes.end(), {c - size / 2, c - size / 2, c + size / 2, c + size / 2});
      labels.push_back(int32_t(1 + labels.size() * 7 % 80));
    }
    first.push_back(int32_t(labels.size()));
  }
  std::vector<int32_t> prior_labels(size_t(n) * P);
  std::vector<float> loc_t(size_t(n) * P * 4), dconf(size_t(n) * P * 81), dloc(size_t(n) * P * 4);
  Arena loss_arena;
  arena_init(loss_arena, sizeof(float) * (ssd_loss_scratch_floats(n, P) + ssd_assign_scratch_floats(P, 12) + 4096));
  arena_reset(m.arena);
  const SsdOutputs o = ssd_forward(*m.net, m.store, m.arena, x.data(), n, true);
  ssd_assign_targets(ssd_priors(*m.net).data(), P, boxes.data(), labels.data(), first.data(), n, 0.5f, 0.1f, 0.2f,
                     prior_labels.data(), loc_t.data(), loss_arena);
  int positives = 0;
  double loss = 0.0;
  ssd_multibox_loss(o.conf, o.loc, prior_labels.data(), loc_t.data(), n, P, 81, 3.0f, 0.5f, dconf.data(), dloc.data(),
                    &loss, &positives, loss_arena);
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_GT(loss, 0.0);
  EXPECT_GE(positives, 12);
  std::fill(m.store.grads.begin(), m.store.grads.end(), 0.0f);
  ssd_backward(*m.net, m.store, m.arena, dconf.data(), dloc.data(), n, [](size_t) {});
  for (size_t v = 0; v < m.store.views.size(); ++v) {
    const ParamView& pv = m.store.views[v];
    double s = 0;
    for (size_t i = 0; i < pv.count; ++i) s += std::fabs(m.store.grads[pv.offset + i]);
    EXPECT_GT(s, 0.0) << pv.name;
  }
}
