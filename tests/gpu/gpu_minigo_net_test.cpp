// MiniGo's network on the GPU against the CPU (src/workloads/minigo/minigo_model.h): the same
// parameters and positions; the inference outputs MCTS reads (policy and value logits), and one
// training forward with both losses and the backward (every view's gradient, relative to its
// largest, as in the workload step tests: the devices sum in different orders).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/arena.h"
#include "core/param_store.h"
#include "gpu_test_util.h"
#include "workloads/minigo/minigo_model.h"

using namespace mlpd;
using namespace mlpd::gpu_test;

namespace {

struct NetRun {
  std::vector<float> policy, value;  // inference logits
  double loss = 0;
  std::vector<float> grads;
  std::vector<ParamView> views;
};

NetRun run_net(Device d, const std::vector<float>& x, const std::vector<float>& target_policy,
               const std::vector<float>& target_value, int n) {
  MinigoNetSpec spec;
  spec.channels = 32;
  spec.blocks = 2;
  spec.max_batch = n;
  spec.device = d;
  ParamStore store;
  auto net = build_minigo_net(spec, store);
  finalize_params(store);
  init_minigo_net(*net, store, 7);
  place_store_on(store, d);
  const OpTable& ops = ops_for(d);
  Arena arena;
  arena_init_on(d, arena, minigo_arena_bytes(*net, n) + ops.minigo_loss_scratch_floats(n) * sizeof(float) + 4096);
  NetRun r;
  const int moves = spec.moves();
  r.policy.resize(size_t(n) * moves);
  r.value.resize(size_t(n));
  MinigoOutputs o = minigo_forward(*net, store, arena, x.data(), n, false);
  copy_to_host(d, r.policy.data(), o.policy, sizeof(float) * r.policy.size());
  copy_to_host(d, r.value.data(), o.value, sizeof(float) * r.value.size());
  arena_reset(arena);
  o = minigo_forward(*net, store, arena, x.data(), n, true);
  DeviceBytes tp = alloc_on(d, sizeof(float) * target_policy.size()), tv = alloc_on(d, sizeof(float) * target_value.size());
  DeviceBytes dp = alloc_on(d, sizeof(float) * target_policy.size()), dv = alloc_on(d, sizeof(float) * target_value.size());
  copy_to_device(d, tp.get(), target_policy.data(), sizeof(float) * target_policy.size());
  copy_to_device(d, tv.get(), target_value.data(), sizeof(float) * target_value.size());
  const float scale = 1.0f / float(n);
  // The two losses' sums, each where its op adds it (the memory of d), read back and added here.
  DeviceBytes losses = alloc_on(d, 2 * sizeof(double));
  zero_on(d, losses.get(), 2 * sizeof(double));
  ops.softmax_xent_soft(o.policy, as<float>(tp), n, moves, scale, as<float>(dp), as<double>(losses), arena);
  ops.tanh_mse(o.value, as<float>(tv), n, scale, as<float>(dv), as<double>(losses) + 1, arena);
  double host_losses[2] = {0.0, 0.0};
  copy_to_host(d, host_losses, losses.get(), sizeof(host_losses));
  r.loss = host_losses[0] + host_losses[1];
  zero_on(d, grads_data(store), sizeof(float) * store.param_count);
  minigo_backward(*net, store, arena, as<float>(dp), as<float>(dv), n, [](size_t) {});
  r.grads.resize(store.param_count);
  copy_to_host(d, r.grads.data(), grads_data(store), sizeof(float) * r.grads.size());
  r.views = store.views;
  return r;
}

using MinigoNetGpu = GpuTest;

TEST_F(MinigoNetGpu, InferenceAndATrainingStepMatchTheCpu) {
  const int n = 16, moves = 82;
  // 0/1 stone planes as in play, a side-to-move plane of ones or zeros.
  std::vector<float> x = random_levels(size_t(n) * 81 * 17, 1, 1, 1.0f);
  for (float& v : x) v = v > 0 ? 1.0f : 0.0f;
  std::vector<float> tp = random_floats(size_t(n) * moves, 2, 0.0f, 1.0f), tv = random_floats(size_t(n), 3);
  for (int i = 0; i < n; ++i) {
    double s = 0;
    for (int m = 0; m < moves; ++m) s += tp[size_t(i) * moves + m];
    for (int m = 0; m < moves; ++m) tp[size_t(i) * moves + m] = float(tp[size_t(i) * moves + m] / s);
  }
  const NetRun cpu_run = run_net(Device::cpu, x, tp, tv, n);
  const NetRun gpu_run = run_net(Device::cuda, x, tp, tv, n);
  EXPECT_TRUE(all_close("policy logits", gpu_run.policy, cpu_run.policy, 1e-4, 1e-4));
  EXPECT_TRUE(all_close("value logits", gpu_run.value, cpu_run.value, 1e-4, 1e-4));
  EXPECT_NEAR(gpu_run.loss, cpu_run.loss, 1e-4 * std::fabs(cpu_run.loss));
  for (const ParamView& v : cpu_run.views) {
    float largest = 0.0f;
    for (size_t i = 0; i < v.count; ++i) largest = std::max(largest, std::fabs(cpu_run.grads[v.offset + i]));
    size_t wrong = 0;
    for (size_t i = 0; i < v.count; ++i)
      wrong += std::fabs(gpu_run.grads[v.offset + i] - cpu_run.grads[v.offset + i]) > 2e-3f * largest + 1e-7f;
    EXPECT_EQ(wrong, 0u) << "view " << v.name << ": " << wrong << " of " << v.count << " gradients differ";
  }
}

}  // namespace
