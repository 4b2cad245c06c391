// MiniGo's policy-value network (src/workloads/minigo/minigo_model.h): shapes, and its backward
// against finite differences of a linear function of both heads' outputs.
#include <gtest/gtest.h>

#include <cblas.h>

#include <vector>

#include "core/arena.h"
#include "core/param_store.h"
#include "core/rng.h"
#include "model_grad_check.h"
#include "workloads/minigo/minigo_model.h"

using namespace mlpd;

TEST(MinigoNet, GradientsMatchFiniteDifferencesOfALinearReadout) {
  openblas_set_num_threads(1);
  MinigoNetSpec spec;
  spec.board = 5;
  spec.planes = 3;
  spec.channels = 4;
  spec.blocks = 2;
  spec.value_hidden = 6;
  spec.max_batch = 3;
  ParamStore store;
  auto net = build_minigo_net(spec, store);
  finalize_params(store);
  init_minigo_net(*net, store, 4);
  Arena arena;
  arena_init(arena, minigo_arena_bytes(*net, spec.max_batch));
  const int n = 3, M = spec.moves();
  EXPECT_EQ(M, 26);
  Rng r{8, 1};
  std::vector<float> x(size_t(n) * 25 * 3), wp(size_t(n) * M), wv(n);
  // Continuous inputs: 0/1 planes on a 5x5 board give channels with exactly equal rows, whose
  // batch norm output sits exactly on a ReLU kink, where no finite difference meets the gradient.
  for (auto& v : x) v = r.normal();
  for (auto& v : wp) v = r.normal();
  for (auto& v : wv) v = r.normal();
  auto readout = [&] {
    arena_reset(arena);
    const MinigoOutputs o = minigo_forward(*net, store, arena, x.data(), n, true);
    return test::dot(o.policy, wp.data(), wp.size()) + test::dot(o.value, wv.data(), wv.size());
  };
  readout();
  std::fill(store.grads.begin(), store.grads.end(), 0.0f);
  std::vector<size_t> order;
  minigo_backward(*net, store, arena, wp.data(), wv.data(), n, [&](size_t v) { order.push_back(v); });
  test::expect_reverse_view_order(store, order);
  test::expect_view_grads_match(store, readout, 3);
}
