// Convolutions in bf16 on one CPU thread, on the mini ResNet-20's shapes (batch 64) and three with
// few input channels: each pass through the op tables as training calls it.
//   fp32:          the fp32 table (direct or im2col+GEMM, as its rule picks);
//   bf16 rounded:  the bf16 table with the bf16 kernel switched off: operands rounded to bf16, then
//                  the fp32 convolution (what --precision bf16 ran before the bf16 kernel);
//   bf16:          the bf16 table as it runs now (* where its rule picks the bf16 direct kernel).
// Each shape is checked first: the bf16 direct kernel against the double-precision convolution
// of rounded operands on a batch of 2, within fp32 summation error (#wrong column). GF/s from
// the median of the thread's CPU time. bench/conv_bf16_vs_torch.py runs this beside PyTorch.
//   bench_conv_bf16 [reps] [--tsv]
#include <cblas.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/bench_timing.h"
#include "core/arena.h"
#include "core/bf16.h"
#include "core/fpu.h"
#include "core/rng.h"
#include "kernels/cpu/conv_paths.h"
#include "kernels/op_table.h"
#include "tests/kernels/conv_reference.h"

using namespace mlpd;
using mlpd::bench::median_cpu_seconds;
using mlpd::test::ConvReference;

namespace {

const ConvDims kShapes[] = {
    // n, h, w, c_in, c_out, k, stride, pad: ResNet-20 on 28x28x1 (mini resnet)
    {64, 28, 28, 1, 16, 3, 1, 1},  {64, 28, 28, 16, 16, 3, 1, 1}, {64, 28, 28, 16, 32, 3, 2, 1},
    {64, 14, 14, 32, 32, 3, 1, 1}, {64, 14, 14, 32, 64, 3, 2, 1}, {64, 7, 7, 64, 64, 3, 1, 1},
    {64, 28, 28, 16, 32, 1, 2, 0}, {64, 14, 14, 32, 64, 1, 2, 0},
    // few input channels (an RGB stem, and the rule's edges)
    {16, 64, 64, 3, 16, 3, 1, 1},  {16, 64, 64, 4, 16, 3, 1, 1},  {16, 64, 64, 8, 16, 3, 1, 1},
};

const ConvPass kPasses[] = {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_weights};
const char* pass_name(ConvPass p) {
  return p == ConvPass::forward ? "fwd" : p == ConvPass::backward_data ? "bwdD" : "bwdW";
}

std::vector<float> random_vec(size_t n, uint64_t stream) {
  Rng r{3, stream};
  std::vector<float> v(n);
  for (auto& x : v) x = 2.0f * r.uniform() - 1.0f;
  return v;
}

struct Operands {
  std::vector<float> x, w, dy, y, dx, dw;
  explicit Operands(const ConvDims& d)
      : x(random_vec(test::conv_in_size(d), 1)), w(random_vec(test::conv_w_size(d), 2)),
        dy(random_vec(test::conv_out_size(d), 3)), y(test::conv_out_size(d)), dx(test::conv_in_size(d)),
        dw(test::conv_w_size(d), 0.0f) {}
};

void run_pass(const OpTable& t, ConvPass p, const ConvDims& d, Operands& o, Arena& arena) {
  if (p == ConvPass::forward) t.conv2d_forward(d, o.x.data(), o.w.data(), o.y.data(), arena);
  if (p == ConvPass::backward_data) t.conv2d_backward_data(d, o.dy.data(), o.w.data(), o.dx.data(), arena, false);
  if (p == ConvPass::backward_weights) t.conv2d_backward_weights(d, o.x.data(), o.dy.data(), o.dw.data(), arena);
}

// The bf16 direct kernel's passes on a batch of 2 against the reference: values outside fp32
// summation error of the convolution of rounded operands (for y and dx, which the kernel rounds
// to bf16, outside that plus one bf16 ulp).
int check_kernel(ConvDims d, Arena& arena) {
  d.n = 2;
  Operands o(d);
  std::vector<float> xr = o.x, wr = o.w, dyr = o.dy;
  for (auto* v : {&xr, &wr, &dyr})
    for (float& f : *v) f = round_to_bf16(f);
  const ConvReference ref = test::conv_reference(d, xr, wr, dyr);
  int wrong = 0;
  auto count = [&](const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& mag,
                   bool rounded) {
    for (size_t i = 0; i < got.size(); ++i) {
      const double ulp = rounded ? std::ldexp(std::fabs(want[i]), -7) : 0.0;
      wrong += std::fabs(got[i] - want[i]) > 1e-5 * mag[i] + ulp ? 1 : 0;
    }
  };
  if (direct_conv_bf16_supported(d, ConvPass::forward)) {
    direct_conv_bf16_forward(d, o.x.data(), o.w.data(), o.y.data(), arena);
    count(o.y, ref.y, ref.y_abs, true);
  }
  if (direct_conv_bf16_supported(d, ConvPass::backward_data)) {
    direct_conv_bf16_backward_data(d, o.dy.data(), o.w.data(), o.dx.data(), arena, false);
    count(o.dx, ref.dx, ref.dx_abs, true);
  }
  if (direct_conv_bf16_supported(d, ConvPass::backward_weights)) {
    direct_conv_bf16_backward_weights(d, o.x.data(), o.dy.data(), o.dw.data(), arena);
    count(o.dw, ref.dw, ref.dw_abs, false);
  }
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  const mlpd::bench::KernelBenchArgs args = mlpd::bench::parse_kernel_bench_args(argc, argv, 9, "bench_conv_bf16");
  const int reps = args.reps;
  const bool tsv = args.tsv;
  openblas_set_num_threads(1);
  enable_flush_denormals();
  const OpTable& fp32 = ops_for(Device::cpu, Precision::fp32);
  const OpTable& bf16 = ops_for(Device::cpu, Precision::bf16);
  size_t scratch = 0;
  for (bool direct : {false, true}) {  // each shape runs on both of the bf16 table's paths
    conv_bf16_set_direct_enabled(direct);
    for (const auto& d : kShapes) scratch = std::max(scratch, bf16.conv2d_scratch_floats(d));
  }
  Arena arena;
  arena_init(arena, scratch * sizeof(float) + 4096);
  const bool native = direct_conv_bf16_supported(kShapes[1], ConvPass::forward);
  if (tsv) {
    std::printf("shape\tpass\tmflop\twrong\tfp32_gfs\tbf16_rounded_gfs\tbf16_gfs\tbf16_direct\n");
  } else {
    std::printf("one thread; bf16 direct convolution kernel: %s; GF/s by thread CPU time, median of %d\n",
                native ? "avx512bf16" : "not built (no -mavx512bf16)", reps);
    std::printf("%-26s %4s %7s %6s %8s %13s %8s %10s\n", "conv (n,h,w,cin->cout,k/s/p)", "pass", "MFLOP", "#wrong",
                "fp32", "bf16 rounded", "bf16", "bf16/fp32");
  }
  int failures = 0;
  for (const auto& d : kShapes) {
    const int wrong = check_kernel(d, arena);
    failures += wrong;
    Operands o(d);
    const double flop = 2.0 * double(test::conv_out_size(d)) * d.k * d.k * d.c_in;
    char name[64];
    std::snprintf(name, sizeof(name), "%d,%dx%dx%d->%d,%d/%d/%d", d.n, d.h, d.w, d.c_in, d.c_out, d.k, d.stride,
                  d.pad);
    for (ConvPass p : kPasses) {
      const double t_fp32 = median_cpu_seconds(reps, [&] { run_pass(fp32, p, d, o, arena); });
      conv_bf16_set_direct_enabled(false);
      const double t_rounded = median_cpu_seconds(reps, [&] { run_pass(bf16, p, d, o, arena); });
      conv_bf16_set_direct_enabled(true);
      const double t_bf16 = median_cpu_seconds(reps, [&] { run_pass(bf16, p, d, o, arena); });
      const bool direct = conv_bf16_use_direct(d, p);
      const double g32 = flop / t_fp32 / 1e9, gr = flop / t_rounded / 1e9, g16 = flop / t_bf16 / 1e9;
      if (tsv)
        std::printf("%s\t%s\t%.1f\t%d\t%.2f\t%.2f\t%.2f\t%d\n", name, pass_name(p), flop / 1e6, wrong, g32, gr, g16,
                    direct ? 1 : 0);
      else
        std::printf("%-26s %4s %7.1f %6d %8.1f %13.1f %7.1f%s %9.2fx\n", name, pass_name(p), flop / 1e6, wrong, g32,
                    gr, g16, direct ? "*" : " ", g16 / g32);
    }
  }
  if (failures > 0) std::fprintf(stderr, "bench_conv_bf16: %d results outside fp32 summation error\n", failures);
  return failures > 0 ? 1 : 0;
}
