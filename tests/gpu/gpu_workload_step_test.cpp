// One training step of each mini workload on the GPU against the same step on the CPU: the same
// seed, the same batch, the loss and every parameter's gradient compared (fp32 tolerance, relative
// to each view's largest gradient: the two devices sum in different orders). This is what ties
// the device plumbing (store placement, input and label copies, op tables) to the kernels.
// Data: the prepared mini files in $MLPD_TEST_DATA_DIR, else <build>/testdata
// (`mlperf-dist prepare --benchmark B --scale mini --data-dir <build>/testdata`).
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "mlperf/config.h"
#include "workloads/registry.h"

namespace mlpd {
namespace {

std::string test_data_dir() {
  const char* env = std::getenv("MLPD_TEST_DATA_DIR");
  return env && *env ? env : std::string(MLPD_BINARY_DIR) + "/testdata";
}

struct StepResult {
  StepStats stats;          // its loss pointer cleared: the StepLoss lived in the workload
  double loss_sum = 0.0;    // step_loss_sum(stats), read while the workload was alive
  std::vector<float> grads;
  std::vector<ParamView> views;
};

StepResult one_step(const std::string& benchmark, Device device, Precision precision,
                    const std::vector<std::string>& sets) {
  const WorkloadEntry& entry = find_workload(benchmark);
  const ScaleSpec& scale = find_scale(entry.spec, "mini");
  const nlohmann::json config = resolve_config(scale.defaults_yaml, "", sets);
  const WorkloadContext ctx{0, 1, "mini", test_data_dir(), device, precision};
  std::unique_ptr<Workload> wl = entry.make(ctx, config);
  wl->init_parameters(1234);
  place_store_on(wl->store, device);
  zero_grads(wl->store);
  StepResult r;
  r.stats = wl->train_step(0, 0, GradReady{});
  EXPECT_NE(r.stats.loss, nullptr) << benchmark << ": the step reports no loss";
  r.loss_sum = step_loss_sum(r.stats);
  r.stats.loss = nullptr;
  r.grads.assign(wl->store.param_count, 0.0f);
  copy_to_host(device, r.grads.data(), grads_data(wl->store), r.grads.size() * sizeof(float));
  r.views = wl->store.views;
  return r;
}

// fp32: loss within 1e-4 relative, gradients within 2e-3 of each view's largest. bf16 (both devices
// in bf16): activations rounded where the devices' fp32 sums differ may land a bf16 step apart, so
// 1e-2 and 2e-2; and a pre-activation that close to zero may take the other side of a ReLU, which
// changes that sample's whole contribution to the gradients below it: up to 1 in 10^4 of a view's
// gradients may differ more (the emulator showed 22 of ncf's 1.16M mlp_item_embedding gradients).
void expect_same_step(const std::string& benchmark, const std::vector<std::string>& sets,
                      Precision precision = Precision::fp32) {
  const bool bf16 = precision == Precision::bf16;
  const double loss_rel = bf16 ? 1e-2 : 1e-4, grad_rel = bf16 ? 2e-2 : 2e-3;
  const std::string data = test_data_dir() + "/" + benchmark + "_mini.h5";
  ASSERT_TRUE(std::filesystem::exists(data)) << data << " is missing: run `mlperf-dist prepare --benchmark " << benchmark
                                             << " --scale mini --data-dir " << test_data_dir() << "`";
  const StepResult cpu = one_step(benchmark, Device::cpu, precision, sets);
  const StepResult gpu = one_step(benchmark, Device::cuda, precision, sets);
  EXPECT_EQ(cpu.stats.loss_weight, gpu.stats.loss_weight);
  EXPECT_NEAR(gpu.loss_sum, cpu.loss_sum, loss_rel * std::fabs(cpu.loss_sum) + 1e-6);
  ASSERT_EQ(cpu.grads.size(), gpu.grads.size());
  for (const ParamView& v : cpu.views) {
    float largest = 0.0f;
    for (size_t i = 0; i < v.count; ++i) largest = std::max(largest, std::fabs(cpu.grads[v.offset + i]));
    size_t wrong = 0, worst = 0;
    double worst_err = 0.0;
    for (size_t i = 0; i < v.count; ++i) {
      const double err = std::fabs(double(gpu.grads[v.offset + i]) - cpu.grads[v.offset + i]);
      if (err > grad_rel * largest + 1e-7) ++wrong;
      if (err > worst_err) worst_err = err, worst = i;
    }
    const size_t allowed = bf16 ? v.count / 10000 : 0;
    EXPECT_LE(wrong, allowed) << benchmark << " view " << v.name << ": " << wrong << " of " << v.count
                         << " gradients differ beyond " << grad_rel << " of the view's largest (" << largest
                         << "); worst at " << worst
                         << ": cpu " << cpu.grads[v.offset + worst] << " gpu " << gpu.grads[v.offset + worst];
  }
}

using GpuWorkloadStep = gpu_test::GpuTest;

TEST_F(GpuWorkloadStep, ResnetMiniStepMatchesTheCpu) { expect_same_step("resnet", {"global_batch_size=64"}); }

TEST_F(GpuWorkloadStep, NcfMiniStepMatchesTheCpu) { expect_same_step("ncf", {}); }

TEST_F(GpuWorkloadStep, ResnetMiniBf16StepMatchesTheCpuBf16Step) {
  expect_same_step("resnet", {"global_batch_size=64"}, Precision::bf16);
}

TEST_F(GpuWorkloadStep, NcfMiniBf16StepMatchesTheCpuBf16Step) { expect_same_step("ncf", {}, Precision::bf16); }

// The evaluation on the device scores many users per forward (neumf_score_users: one host wait per
// call); the CPU one user at a time through its split first layer. HR@10 and NDCG from the same
// initial parameters: the hits may differ only where the two devices' rounding reorders a user's
// near-tied scores.
TEST_F(GpuWorkloadStep, NcfMiniEvaluationMatchesTheCpu) {
  const WorkloadEntry& entry = find_workload("ncf");
  const nlohmann::json config = resolve_config(find_scale(entry.spec, "mini").defaults_yaml, "", {});
  auto evaluate_on = [&](Device device) {
    std::unique_ptr<Workload> wl = entry.make({0, 1, "mini", test_data_dir(), device, Precision::fp32}, config);
    wl->init_parameters(1234);
    for (float& p : wl->store.params) p *= 30.0f;  // away from the near-zero init: scores spread out
    place_store_on(wl->store, device);
    return wl->evaluate().sums;
  };
  const std::vector<double> cpu = evaluate_on(Device::cpu), gpu = evaluate_on(Device::cuda);
  ASSERT_EQ(cpu.size(), 3u);  // hits, users, ndcg
  ASSERT_EQ(gpu.size(), 3u);
  EXPECT_EQ(gpu[1], cpu[1]);
  EXPECT_GT(cpu[0], 0.0);
  EXPECT_LT(cpu[0], cpu[1]);  // neither no hit nor every user a hit: the comparison can fail
  EXPECT_NEAR(gpu[0], cpu[0], 0.005 * cpu[1] + 1.0);
  EXPECT_NEAR(gpu[2], cpu[2], 0.005 * cpu[1] + 1.0);
}

// Dropout stays on: its masks are a function of (seed, element offset) on both devices.
TEST_F(GpuWorkloadStep, TransformerMiniStepMatchesTheCpu) { expect_same_step("transformer", {"global_batch_size=32"}); }

TEST_F(GpuWorkloadStep, GnmtMiniStepMatchesTheCpu) { expect_same_step("gnmt", {"global_batch_size=32"}); }

// Target assignment, hard-negative mining and the random crop: the same decisions on both devices.
TEST_F(GpuWorkloadStep, SsdMiniStepMatchesTheCpu) { expect_same_step("ssd", {"global_batch_size=16"}); }

// gnmt's bf16 step: its LSTM and attention GEMMs on bf16 tensor cores. The transformer's and
// ssd's bf16 steps exceed this comparison on the emulator (6 Dec), we think for reasons of bf16
// itself, not of the device: the transformer's gradients move as much (2.4% of the cross-attention
// queries' norm) on the CPU alone when its bf16 GEMMs sum in another order (the native kernel
// off); every ssd
// convolution of its step gives the rounding path's bits on the tensor-core path, yet its loss
// moves by 0.02 of 427 (0.002 on our implicit-GEMM path): most likely its hard-negative mining
// choosing otherwise among near-ties of rounded losses, not shown.
TEST_F(GpuWorkloadStep, GnmtMiniBf16StepMatchesTheCpuBf16Step) {
  expect_same_step("gnmt", {"global_batch_size=32"}, Precision::bf16);
}

// The RPN's loss and proposals, the RoIs sampled from those proposals, the box and mask heads'
// losses, all on the device: the proposals' ranks and suppressions and the samples' IoU tests are
// exact on both devices, so the same RoIs are drawn unless the devices' rounding moves a proposal
// across a rank or a threshold (the loss and gradients would then differ far beyond tolerance).
TEST_F(GpuWorkloadStep, MaskrcnnMiniStepMatchesTheCpu) { expect_same_step("maskrcnn", {"global_batch_size=8"}); }

}  // namespace
}  // namespace mlpd
