// The bf16 GEMM on one CPU thread, on the GEMM shapes of the mini ncf, transformer and gnmt steps
// (and two square ones): OpenBLAS sgemm on the fp32 values, gemm_bf16 widened for OpenBLAS, and
// our AVX512-BF16 kernel where built. Each shape is checked first: the native result against the
// double-precision product, within the bound of fp32 summation (#wrong column). GF/s from the
// median of the thread's CPU time (the machine is shared). bench/gemm_bf16_vs_torch.py runs this
// beside PyTorch's matmul on the same shapes.
//   bench_gemm_bf16 [reps] [--tsv]
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "bench/bench_timing.h"
#include "core/bf16.h"
#include "core/fpu.h"
#include "core/rng.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/ops.h"

extern "C" char* openblas_get_corename(void);

using namespace mlpd;
using mlpd::bench::median_cpu_seconds;

namespace {

struct Shape {
  const char* name;
  bool ta, tb;
  int m, n, k;
};

// Rows are tokens or samples of one rank's step (ncf 2048 samples, transformer ~1300 tokens,
// gnmt 32 sentences a time step, ~600 tokens a layer).
const Shape kShapes[] = {
    {"ncf mlp 256->256 fwd", false, false, 2048, 256, 256},
    {"ncf mlp 256->128 dw", true, false, 256, 128, 2048},
    {"transformer qkv fwd", false, false, 1300, 768, 256},
    {"transformer ffn dx", false, true, 1300, 256, 512},
    {"transformer ffn dw", true, false, 256, 512, 1300},
    {"transformer logits", false, true, 1300, 4000, 256},
    {"gnmt lstm step", false, false, 32, 1024, 256},
    {"gnmt lstm input", false, false, 600, 1024, 512},
    {"square 512", false, false, 512, 512, 512},
    {"square 1024", false, false, 1024, 1024, 1024},
};

std::vector<float> bf16_values(size_t n, uint64_t stream) {
  Rng r{7, stream};
  std::vector<float> v(n);
  for (auto& x : v) x = round_to_bf16(2.0f * r.uniform() - 1.0f);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const mlpd::bench::KernelBenchArgs args = mlpd::bench::parse_kernel_bench_args(argc, argv, 15, "bench_gemm_bf16");
  const int reps = args.reps;
  const bool tsv = args.tsv;
  openblas_set_num_threads(1);
  enable_flush_denormals();
  const bool native = gemm_bf16_native_available();
  if (tsv) {
    std::printf("shape\tm\tn\tk\twrong\tsgemm_gfs\twiden_gfs\tnative_gfs\n");
  } else {
    std::printf("one thread; OpenBLAS core %s; gemm_bf16 native kernel: %s\n", openblas_get_corename(),
                native ? "avx512bf16" : "not built (no -mavx512bf16)");
    std::printf("%-22s %5s %5s %5s %6s %12s %12s %12s %14s\n", "shape", "m", "n", "k", "#wrong", "sgemm GF/s",
                "widen GF/s", "native GF/s", "native/sgemm");
  }
  int failures = 0;
  for (const Shape& s : kShapes) {
    const int a_rows = s.ta ? s.k : s.m, a_cols = s.ta ? s.m : s.k;
    const int b_rows = s.tb ? s.n : s.k, b_cols = s.tb ? s.k : s.n;
    const std::vector<float> a = bf16_values(size_t(a_rows) * a_cols, 1), b = bf16_values(size_t(b_rows) * b_cols, 2);
    std::vector<uint16_t> a16(a.size()), b16(b.size());
    for (size_t i = 0; i < a.size(); ++i) a16[i] = f32_to_bf16(a[i]);
    for (size_t i = 0; i < b.size(); ++i) b16[i] = f32_to_bf16(b[i]);
    std::vector<float> c(size_t(s.m) * s.n);

    // Check the path that will be timed, against the exact product (sampled rows).
    gemm_bf16(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a16.data(), a_cols, b16.data(), b_cols, 0.0f, c.data(), s.n);
    int wrong = 0;
    for (int i = 0; i < s.m; i += std::max(1, s.m / 16)) {
      for (int j = 0; j < s.n; ++j) {
        double sum = 0, mag = 0;
        for (int p = 0; p < s.k; ++p) {
          const double av = s.ta ? a[size_t(p) * a_cols + i] : a[size_t(i) * a_cols + p];
          const double bv = s.tb ? b[size_t(j) * b_cols + p] : b[size_t(p) * b_cols + j];
          sum += av * bv;
          mag += std::fabs(av * bv);
        }
        wrong += std::fabs(c[size_t(i) * s.n + j] - sum) <= (s.k + 2) * std::ldexp(mag, -24) ? 0 : 1;
      }
    }
    failures += wrong;

    const double flops = 2.0 * s.m * s.n * s.k;
    const double t_sgemm = median_cpu_seconds(reps, [&] {
      cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans, s.m, s.n, s.k,
                  1.0f, a.data(), a_cols, b.data(), b_cols, 0.0f, c.data(), s.n);
    });
    gemm_bf16_set_native_enabled(false);
    const double t_widen = median_cpu_seconds(reps, [&] {
      gemm_bf16(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a16.data(), a_cols, b16.data(), b_cols, 0.0f, c.data(), s.n);
    });
    gemm_bf16_set_native_enabled(true);
    const double t_native = native ? median_cpu_seconds(reps, [&] {
      gemm_bf16(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a16.data(), a_cols, b16.data(), b_cols, 0.0f, c.data(), s.n);
    })
                                   : 0.0;
    const double g_sgemm = flops / t_sgemm / 1e9, g_widen = flops / t_widen / 1e9;
    const double g_native = native ? flops / t_native / 1e9 : 0.0;
    if (tsv) {
      std::printf("%s\t%d\t%d\t%d\t%d\t%.2f\t%.2f\t%.2f\n", s.name, s.m, s.n, s.k, wrong, g_sgemm, g_widen, g_native);
    } else if (native) {
      std::printf("%-22s %5d %5d %5d %6d %12.1f %12.1f %12.1f %13.2fx\n", s.name, s.m, s.n, s.k, wrong, g_sgemm,
                  g_widen, g_native, g_native / g_sgemm);
    } else {
      std::printf("%-22s %5d %5d %5d %6d %12.1f %12.1f %12s %14s\n", s.name, s.m, s.n, s.k, wrong, g_sgemm, g_widen,
                  "-", "-");
    }
  }
  if (failures > 0) std::fprintf(stderr, "bench_gemm_bf16: %d results outside the fp32 summation bound\n", failures);
  return failures > 0 ? 1 : 0;
}
