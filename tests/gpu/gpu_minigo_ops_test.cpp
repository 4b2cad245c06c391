// The CUDA minigo losses (soft-target softmax cross-entropy, tanh squared error) against the CPU
// ones through the op tables, at sizes from one row to more rows than a block holds. Both compute
// in double: totals within 1e-12 relative (another summation order), gradients 1e-6 + 1e-6*|want|;
// a rerun gives the same bits (fixed-tree fold, no atomics).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "gpu_test_util.h"

using namespace mlpd;
using namespace mlpd::gpu_test;

namespace {

struct LossCase {
  int n, classes;
};

class MinigoLossGpu : public GpuTestWithParam<LossCase> {};

std::vector<float> distributions(int n, int classes, uint64_t stream) {
  std::vector<float> t = random_floats(size_t(n) * classes, stream, 0.0f, 1.0f);
  for (int i = 0; i < n; ++i) {
    double s = 0;
    for (int j = 0; j < classes; ++j) s += t[size_t(i) * classes + j];
    for (int j = 0; j < classes; ++j) t[size_t(i) * classes + j] = float(t[size_t(i) * classes + j] / s);
  }
  return t;
}

TEST_P(MinigoLossGpu, PolicyAndValueLossesMatchTheCpu) {
  const auto [n, classes] = GetParam();
  const std::vector<float> z = random_floats(size_t(n) * classes, 1, -4.0f, 4.0f);
  const std::vector<float> t = distributions(n, classes, 2);
  const std::vector<float> x = random_floats(size_t(n), 3, -3.0f, 3.0f), out = random_floats(size_t(n), 4);
  Arena ha = host_arena(1 << 16);
  Arena da = device_arena(sizeof(float) * (gpu().minigo_loss_scratch_floats(n) + 4096));
  std::vector<float> g_cpu(z.size()), dv_cpu(static_cast<size_t>(n));
  double p_cpu = 0.0, v_cpu = 0.0;
  cpu().softmax_xent_soft(z.data(), t.data(), n, classes, 0.5f, g_cpu.data(), &p_cpu, ha);
  cpu().tanh_mse(x.data(), out.data(), n, 0.5f, dv_cpu.data(), &v_cpu, ha);
  DeviceBuffer<float> dz(z), dt(t), dx(x), dout(out), dg(z.size()), ddv(static_cast<size_t>(n));
  double p_gpu[2], v_gpu[2];
  DeviceLossSum p_sum, v_sum;
  for (int run = 0; run < 2; ++run) {
    arena_reset(da);
    p_sum.zero();
    v_sum.zero();
    gpu().softmax_xent_soft(dz.get(), dt.get(), n, classes, 0.5f, dg.get(), p_sum.get(), da);
    gpu().tanh_mse(dx.get(), dout.get(), n, 0.5f, ddv.get(), v_sum.get(), da);
    p_gpu[run] = p_sum.read();
    v_gpu[run] = v_sum.read();
  }
  EXPECT_TRUE(scalar_close("policy loss", p_gpu[0], p_cpu, 1e-12, 0.0));
  EXPECT_TRUE(scalar_close("value loss", v_gpu[0], v_cpu, 1e-12, 0.0));
  EXPECT_EQ(std::memcmp(&p_gpu[0], &p_gpu[1], sizeof(double)), 0) << "policy loss not the same bits on a rerun";
  EXPECT_EQ(std::memcmp(&v_gpu[0], &v_gpu[1], sizeof(double)), 0) << "value loss not the same bits on a rerun";
  EXPECT_TRUE(all_close("policy gradient", dg.download(), g_cpu, 1e-6, 1e-6));
  EXPECT_TRUE(all_close("value gradient", ddv.download(), dv_cpu, 1e-6, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(Shapes, MinigoLossGpu,
                         ::testing::Values(LossCase{1, 82}, LossCase{7, 26}, LossCase{64, 82}, LossCase{1000, 362}),
                         [](const ::testing::TestParamInfo<LossCase>& i) {
                           return cat("n", i.param.n, "_moves", i.param.classes);
                         });

}  // namespace
