// Convolution kernels and the mini ResNet-20 training step on one thread. Every timed conv is
// first checked against a naive double-precision reference on a small batch (#wrong column),
// for both algorithms (im2col+GEMM and direct) and the per-shape choice the library makes.
// Times are medians over reps; GF/s use the thread's CPU time (the machine is shared, so wall
// time includes time spent descheduled), the model line prints both.
//   bench_conv [reps] [model]     (model: only the ResNet-20 step, e.g. under perf)
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/fpu.h"
#include "core/param_store.h"
#include "core/rng.h"
#include "kernels/cpu/conv_paths.h"
#include "kernels/ops.h"
#include "tests/kernels/conv_reference.h"
#include "workloads/resnet/resnet_model.h"

extern "C" char* openblas_get_corename(void);
extern "C" char* openblas_get_config(void);

using namespace mlpd;

namespace {

std::vector<float> random_vec(size_t n, uint64_t stream) {
  Rng r{1, stream};
  std::vector<float> v(n);
  for (auto& x : v) x = 2.0f * r.uniform() - 1.0f;
  return v;
}

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

struct Times {
  double wall, cpu;  // medians, seconds
};

template <class F>
Times median_seconds(int reps, F&& f) {
  f();  // warm-up
  std::vector<double> tw, tc;
  for (int i = 0; i < reps; ++i) {
    const double c0 = thread_cpu_seconds();
    auto t0 = std::chrono::steady_clock::now();
    f();
    tw.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    tc.push_back(thread_cpu_seconds() - c0);
  }
  std::sort(tw.begin(), tw.end());
  std::sort(tc.begin(), tc.end());
  return {tw[tw.size() / 2], tc[tc.size() / 2]};
}

enum class Algo { gemm, direct, chosen };

void run_conv(Algo a, ConvPass p, const ConvDims& d, const float* in, const float* w, float* out,
              Arena& arena) {
  const bool direct = a == Algo::direct || (a == Algo::chosen && conv_use_direct(d, p));
  switch (p) {
    case ConvPass::forward:
      direct ? direct_conv_forward(d, in, w, out, arena) : gemm_conv_forward(d, in, w, out, arena);
      break;
    case ConvPass::backward_data:
      direct ? direct_conv_backward_data(d, in, w, out, arena, false)
             : gemm_conv_backward_data(d, in, w, out, arena, false);
      break;
    case ConvPass::backward_weights:  // in = x, w = dy, out = dw
      direct ? direct_conv_backward_weights(d, in, w, out, arena)
             : gemm_conv_backward_weights(d, in, w, out, arena);
      break;
  }
}

// Naive references on a small batch; returns the number of wrong outputs across the 3 kernels.
int check_conv(ConvDims d, Algo algo, Arena& arena) {
  d.n = 2;
  const int oh = d.out_h(), ow = d.out_w();
  auto x = random_vec(size_t(d.n) * d.h * d.w * d.c_in, 1);
  auto w = random_vec(size_t(d.k) * d.k * d.c_in * d.c_out, 2);
  auto dy = random_vec(size_t(d.n) * oh * ow * d.c_out, 3);
  test::ConvReference ref = test::conv_reference(d, x, w, dy);
  std::vector<double>& y_ref = ref.y, &dx_ref = ref.dx, &dw_ref = ref.dw;  // zeroed below where a path skips a pass
  std::vector<float> y(y_ref.size()), dx(dx_ref.size()), dw(dw_ref.size(), 0.0f);
  int wrong = 0;
  auto ok = [&](ConvPass p) { return algo != Algo::direct || direct_conv_supported(d, p); };
  if (ok(ConvPass::forward)) run_conv(algo, ConvPass::forward, d, x.data(), w.data(), y.data(), arena);
  else std::fill(y.begin(), y.end(), 0.0f), y_ref.assign(y.size(), 0.0);
  if (ok(ConvPass::backward_data))
    run_conv(algo, ConvPass::backward_data, d, dy.data(), w.data(), dx.data(), arena);
  else std::fill(dx.begin(), dx.end(), 0.0f), dx_ref.assign(dx.size(), 0.0);
  if (ok(ConvPass::backward_weights))
    run_conv(algo, ConvPass::backward_weights, d, x.data(), dy.data(), dw.data(), arena);
  else dw_ref.assign(dw.size(), 0.0);
  auto cmp = [&](const std::vector<float>& a, const std::vector<double>& r) {
    for (size_t i = 0; i < a.size(); ++i) wrong += std::fabs(a[i] - r[i]) > 1e-3 * (1 + std::fabs(r[i]));
  };
  cmp(y, y_ref);
  cmp(dx, dx_ref);
  cmp(dw, dw_ref);
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 9;
  const bool model_only = argc > 2 && std::string(argv[2]) == "model";
  openblas_set_num_threads(1);
  enable_flush_denormals();
  std::printf("openblas core: %s | config: %s\n", openblas_get_corename(), openblas_get_config());
  const ConvDims shapes[] = {
      {64, 28, 28, 16, 16, 3, 1, 1}, {64, 14, 14, 32, 32, 3, 1, 1}, {64, 7, 7, 64, 64, 3, 1, 1},
      {64, 28, 28, 16, 32, 3, 2, 1}, {64, 14, 14, 32, 64, 3, 2, 1}, {64, 28, 28, 16, 32, 1, 2, 0},
      {64, 14, 14, 32, 64, 1, 2, 0},  {64, 28, 28, 1, 16, 3, 1, 1},
      {4, 224, 224, 3, 64, 7, 2, 3}};  // the ResNet-50 stem (small batch: checked naively)
  size_t scratch = 0;
  for (const auto& d : shapes)  // both paths are also run explicitly
    scratch = std::max({scratch, conv2d_scratch_floats(d), gemm_conv_scratch_floats(d),
                        direct_conv_scratch_floats(d)});
  Arena arena;
  arena_init(arena, scratch * sizeof(float) + 4096);
  std::printf("GF/s by thread CPU time; g = im2col+GEMM, d = direct, * = the library's choice\n");
  std::printf("%-28s %7s | %14s | %14s | %14s | %6s\n", "conv (n,h,w,cin->cout,k/s/p)", "MFLOP",
              "fwd  g / d", "bwdD  g / d", "bwdW  g / d", "#wrong");
  int total_wrong = 0;
  for (const auto& d : shapes) {
    if (model_only) break;
    const int wrong = check_conv(d, Algo::gemm, arena) + check_conv(d, Algo::direct, arena) +
                      check_conv(d, Algo::chosen, arena);
    total_wrong += wrong;
    auto x = random_vec(size_t(d.n) * d.h * d.w * d.c_in, 4);
    auto w = random_vec(size_t(d.k) * d.k * d.c_in * d.c_out, 5);
    const size_t ysz = size_t(d.n) * d.out_h() * d.out_w() * d.c_out;
    auto dy = random_vec(ysz, 6);
    std::vector<float> y(ysz), dx(x.size()), dw(w.size(), 0.0f);
    const double flop = 2.0 * ysz * d.k * d.k * d.c_in;
    char name[64];
    std::snprintf(name, sizeof(name), "%d,%dx%dx%d->%d,%d/%d/%d", d.n, d.h, d.w, d.c_in, d.c_out, d.k,
                  d.stride, d.pad);
    std::printf("%-28s %7.1f", name, flop / 1e6);
    for (ConvPass p : {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_weights}) {
      const float* in = p == ConvPass::backward_data ? dy.data() : x.data();
      const float* wt = p == ConvPass::backward_weights ? dy.data() : w.data();
      float* out = p == ConvPass::forward ? y.data() : p == ConvPass::backward_data ? dx.data() : dw.data();
      const bool use_d = conv_use_direct(d, p);
      const double tg = median_seconds(reps, [&] { run_conv(Algo::gemm, p, d, in, wt, out, arena); }).cpu;
      char dcol[16] = "    -";
      if (direct_conv_supported(d, p)) {
        const double td = median_seconds(reps, [&] { run_conv(Algo::direct, p, d, in, wt, out, arena); }).cpu;
        std::snprintf(dcol, sizeof(dcol), "%5.1f%s", flop / td / 1e9, use_d ? "*" : " ");
      }
      std::printf(" | %5.1f%s / %s", flop / tg / 1e9, use_d ? " " : "*", dcol);
    }
    std::printf(" | %6d\n", wrong);
  }

  for (int batch : {64, 128})
  for (bool direct : {false, true}) {
    if (model_only && !direct) continue;
    conv_set_direct_enabled(direct);
    ResNetSpec spec;  // mini ResNet-20: 28x28x1, 10 classes, 3 blocks per stage
    spec.max_batch = batch;
    ParamStore store;
    auto net = build_resnet(spec, store);
    finalize_params(store);
    init_resnet(*net, store, 1);
    Arena a;
    arena_init(a, resnet_arena_bytes(*net, batch));
    auto x = random_vec(size_t(batch) * 28 * 28, 7);
    std::vector<int32_t> labels(batch);
    for (int i = 0; i < batch; ++i) labels[i] = i % 10;
    std::vector<float> dl(size_t(batch) * 10);
    double loss = 0;
    auto step = [&] {
      arena_reset(a);
      const float* z = resnet_forward(*net, store, a, x.data(), batch, true);
      loss = 0.0;
      softmax_xent(z, labels.data(), batch, 10, 0.1f, 1.0f / batch, dl.data(), &loss, nullptr);
      resnet_backward(*net, store, a, dl.data(), batch, [](size_t) {});
    };
    const Times t = median_seconds(reps, step);
    const double fwd = resnet_flops_per_image(*net);
    std::printf("%s | %-6s | batch %d: wall %.1f ms/step %.0f img/s | cpu %.1f ms/step %.0f img/s %.1f GFLOP/s (3x fwd) | loss %.3f%s\n",
                resnet_summary(*net).c_str(), direct ? "chosen" : "gemm", batch, t.wall * 1e3, batch / t.wall, t.cpu * 1e3,
                batch / t.cpu, 3 * fwd * batch / t.cpu / 1e9, loss / batch,
                std::isfinite(loss) ? "" : " NOT FINITE");
  }
  std::printf("#wrong total: %d\n", total_wrong);
  return total_wrong == 0 ? 0 : 1;
}
