// Convolution kernels and the mini ResNet-20 training step on one thread. Every timed conv is
// first checked against a naive double-precision reference on a small batch (#wrong column).
//   bench_conv [reps]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/arena.h"
#include "core/fpu.h"
#include "core/param_store.h"
#include "core/rng.h"
#include "kernels/ops.h"
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

template <class F>
double median_seconds(int reps, F&& f) {
  f();  // warm-up
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Naive references on a small batch; returns the number of wrong outputs across the 3 kernels.
int check_conv(ConvDims d, Arena& arena) {
  d.n = 2;
  const int oh = d.out_h(), ow = d.out_w();
  auto x = random_vec(size_t(d.n) * d.h * d.w * d.c_in, 1);
  auto w = random_vec(size_t(d.k) * d.k * d.c_in * d.c_out, 2);
  auto dy = random_vec(size_t(d.n) * oh * ow * d.c_out, 3);
  std::vector<double> y_ref(dy.size(), 0.0), dx_ref(x.size(), 0.0), dw_ref(w.size(), 0.0);
  for (int n = 0; n < d.n; ++n)
    for (int i = 0; i < oh; ++i)
      for (int j = 0; j < ow; ++j)
        for (int kh = 0; kh < d.k; ++kh)
          for (int kw = 0; kw < d.k; ++kw) {
            const int ih = i * d.stride - d.pad + kh, iw = j * d.stride - d.pad + kw;
            if (ih < 0 || ih >= d.h || iw < 0 || iw >= d.w) continue;
            for (int ci = 0; ci < d.c_in; ++ci)
              for (int co = 0; co < d.c_out; ++co) {
                const size_t xi = ((size_t(n) * d.h + ih) * d.w + iw) * d.c_in + ci;
                const size_t wi = ((size_t(kh) * d.k + kw) * d.c_in + ci) * d.c_out + co;
                const size_t yi = ((size_t(n) * oh + i) * ow + j) * d.c_out + co;
                y_ref[yi] += double(x[xi]) * w[wi];
                dx_ref[xi] += double(dy[yi]) * w[wi];
                dw_ref[wi] += double(dy[yi]) * x[xi];
              }
          }
  std::vector<float> y(y_ref.size()), dx(dx_ref.size()), dw(dw_ref.size(), 0.0f);
  conv2d_forward(d, x.data(), w.data(), y.data(), arena);
  conv2d_backward_data(d, dy.data(), w.data(), dx.data(), arena, false);
  conv2d_backward_weights(d, x.data(), dy.data(), dw.data(), arena);
  int wrong = 0;
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
  openblas_set_num_threads(1);
  enable_flush_denormals();
  std::printf("openblas core: %s | config: %s\n", openblas_get_corename(), openblas_get_config());
  const ConvDims shapes[] = {
      {64, 28, 28, 16, 16, 3, 1, 1}, {64, 14, 14, 32, 32, 3, 1, 1}, {64, 7, 7, 64, 64, 3, 1, 1},
      {64, 28, 28, 16, 32, 3, 2, 1}, {64, 14, 14, 32, 64, 3, 2, 1}, {64, 28, 28, 16, 32, 1, 2, 0},
      {64, 14, 14, 32, 64, 1, 2, 0},  {64, 28, 28, 1, 16, 3, 1, 1}};
  size_t scratch = 0;
  for (const auto& d : shapes) scratch = std::max(scratch, conv2d_scratch_floats(d));
  Arena arena;
  arena_init(arena, scratch * sizeof(float) + 4096);
  std::printf("%-28s %9s %9s %9s %9s %7s\n", "conv (n,h,w,cin->cout,k/s/p)", "MFLOP", "fwd GF/s",
              "bwdD GF/s", "bwdW GF/s", "#wrong");
  int total_wrong = 0;
  for (const auto& d : shapes) {
    const int wrong = check_conv(d, arena);
    total_wrong += wrong;
    auto x = random_vec(size_t(d.n) * d.h * d.w * d.c_in, 4);
    auto w = random_vec(size_t(d.k) * d.k * d.c_in * d.c_out, 5);
    const size_t ysz = size_t(d.n) * d.out_h() * d.out_w() * d.c_out;
    auto dy = random_vec(ysz, 6);
    std::vector<float> y(ysz), dx(x.size()), dw(w.size(), 0.0f);
    const double flop = 2.0 * ysz * d.k * d.k * d.c_in;
    const double tf = median_seconds(reps, [&] { conv2d_forward(d, x.data(), w.data(), y.data(), arena); });
    const double td = median_seconds(reps, [&] { conv2d_backward_data(d, dy.data(), w.data(), dx.data(), arena); });
    const double tw = median_seconds(reps, [&] { conv2d_backward_weights(d, x.data(), dy.data(), dw.data(), arena); });
    char name[64];
    std::snprintf(name, sizeof(name), "%d,%dx%dx%d->%d,%d/%d/%d", d.n, d.h, d.w, d.c_in, d.c_out, d.k,
                  d.stride, d.pad);
    std::printf("%-28s %9.1f %9.1f %9.1f %9.1f %7d\n", name, flop / 1e6, flop / tf / 1e9, flop / td / 1e9,
                flop / tw / 1e9, wrong);
  }

  for (int batch : {64, 128}) {
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
      loss = softmax_xent(z, labels.data(), batch, 10, 0.1f, 1.0f / batch, dl.data(), nullptr);
      resnet_backward(*net, store, a, dl.data(), batch, [](size_t) {});
    };
    const double t = median_seconds(reps, step);
    const double fwd = resnet_flops_per_image(*net);
    std::printf("%s | batch %d: %.1f ms/step, %.0f img/s, %.1f GFLOP/s (3x fwd), loss %.3f%s\n",
                resnet_summary(*net).c_str(), batch, t * 1e3, batch / t, 3 * fwd * batch / t / 1e9,
                loss / batch, std::isfinite(loss) ? "" : " NOT FINITE");
  }
  std::printf("#wrong total: %d\n", total_wrong);
  return total_wrong == 0 ? 0 : 1;
}
