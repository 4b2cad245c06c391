// How fast is each CUDA op at the shapes the workloads run (ResNet-50 at 32 images per GPU,
// ResNet-20 "mini" at 128, NCF at 131072 samples per GPU and a 1M-sample scatter), and how close
// is it to what the GPU can do? Each op is first checked once against its CPU op (kernels/cpu) on
// the same inputs: a wrong result is reported in the #wrong column and the run exits 1. Then it is
// timed on the host around a device synchronize, and its bytes and FLOPs (napkin math, printed)
// give GB/s, GFLOP/s and the share of the device's peak (from cudaGetDeviceProperties).
// Usage: kernels_cuda [--op NAME]... [--iters N] [--help]
#ifdef MLPD_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/arena.h"
#include "core/rng.h"
#include "kernels/device.h"
#include "kernels/op_table.h"

#ifdef MLPD_HAVE_CUDA
namespace {

using namespace mlpd;

// ---- inputs and buffers ----
std::vector<float> randf(size_t n, uint64_t stream, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = lo + (hi - lo) * rng_uniform(77, stream, i);
  return v;
}
std::vector<int32_t> randi(size_t n, uint64_t stream, int32_t bound) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = int32_t(rng_below(77, stream, i, uint64_t(bound)));
  return v;
}

// A device copy of a host vector; reset() uploads the host values again (before a check).
template <typename T>
struct Dev {
  std::vector<T> host;
  DeviceBytes bytes;
  explicit Dev(std::vector<T> h) : host(std::move(h)), bytes(alloc_on(Device::cuda, host.size() * sizeof(T))) {
    reset();
  }
  T* d() const { return as<T>(bytes); }
  void reset() { copy_to_device(Device::cuda, d(), host.data(), host.size() * sizeof(T)); }
  std::vector<T> download() const {
    std::vector<T> h(host.size());
    copy_to_host(Device::cuda, h.data(), d(), h.size() * sizeof(T));
    return h;
  }
};
using DevF = Dev<float>;
using DevI = Dev<int32_t>;

// Values off by more than abs + rel*|want| (the tolerances of tests/gpu); names the first one.
size_t count_wrong(const char* what, const std::vector<float>& got, const std::vector<float>& want, double rel,
                   double abs) {
  size_t wrong = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::fabs(double(got[i]) - double(want[i]));
    if (!(d <= abs + rel * std::fabs(double(want[i])))) {
      if (wrong++ == 0)
        std::fprintf(stderr, "kernels_cuda: %s: [%zu] got %.9g, want %.9g\n", what, i, double(got[i]), double(want[i]));
    }
  }
  return wrong;
}
size_t wrong_scalar(const char* what, double got, double want, double rel, double abs) {
  if (std::fabs(got - want) <= abs + rel * std::fabs(want)) return 0;
  std::fprintf(stderr, "kernels_cuda: %s: got %.17g, want %.17g\n", what, got, want);
  return 1;
}

const OpTable& C() { return cpu_ops(); }
const OpTable& G() { return cuda_ops(); }
// The bf16 tables (--precision bf16): checked CUDA against CPU at the tolerance of tests/gpu/gpu_bf16_test.cpp.
const OpTable& C(Precision p) { return ops_for(Device::cpu, p); }
const OpTable& G(Precision p) { return ops_for(Device::cuda, p); }
double rel_tolerance(Precision p) { return p == Precision::bf16 ? 1e-2 : 1e-4; }
double abs_tolerance(Precision p) { return p == Precision::bf16 ? 1e-3 : 1e-4; }
std::string precision_label(Precision p) { return p == Precision::bf16 ? "bf16 " : ""; }

// One measured op at one shape.
struct Case {
  Case(std::string op_name, std::string shape_text) : op(std::move(op_name)), shape(std::move(shape_text)) {}
  std::string op, shape;
  double bytes = 0, flops = 0;        // per call, napkin math
  std::function<size_t()> check;      // one CUDA call and one CPU call on the same inputs: #wrong
  std::function<void()> run;          // one CUDA call
};
struct Entry {
  std::string op;
  std::function<Case()> make;  // builds the inputs only when the op is selected
};

constexpr double kF = sizeof(float);

// ---- GEMM ----
Case gemm_case(bool ta, bool tb, int m, int n, int k, const char* label, Precision p = Precision::fp32) {
  auto a = std::make_shared<DevF>(randf(size_t(m) * k, 1)), b = std::make_shared<DevF>(randf(size_t(k) * n, 2));
  auto c = std::make_shared<DevF>(std::vector<float>(size_t(m) * n, 0.0f));
  const int lda = ta ? m : k, ldb = tb ? k : n;
  Case r{"gemm", precision_label(p) + (ta ? "T" : "N") + (tb ? "T" : "N") + " " + std::to_string(m) + "x" +
                     std::to_string(n) + "x" + std::to_string(k) + " " + label};
  r.bytes = kF * (double(m) * k + double(k) * n + double(m) * n);
  r.flops = 2.0 * m * n * k;
  r.run = [=] { G(p).gemm(ta, tb, m, n, k, 1.0f, a->d(), lda, b->d(), ldb, 0.0f, c->d(), n); };
  r.check = [=] {
    G(p).gemm(ta, tb, m, n, k, 1.0f, a->d(), lda, b->d(), ldb, 0.0f, c->d(), n);
    std::vector<float> want(c->host.size());
    C(p).gemm(ta, tb, m, n, k, 1.0f, a->host.data(), lda, b->host.data(), ldb, 0.0f, want.data(), n);
    return count_wrong("gemm C", c->download(), want, rel_tolerance(p), abs_tolerance(p));
  };
  return r;
}

// ---- Convolution ----
enum class Pass { forward, backward_data, backward_weights };
const char* const kConvOpNames[] = {"conv2d_forward", "conv2d_backward_data", "conv2d_backward_weights"};

ConvDims dims(int n, int h, int w, int ci, int co, int k, int s, int p) {
  ConvDims d;
  d.n = n, d.h = h, d.w = w, d.c_in = ci, d.c_out = co, d.k = k, d.stride = s, d.pad = p;
  return d;
}

Case conv_case(Pass pass, const ConvDims& d, const char* label, Precision p = Precision::fp32) {
  const size_t nx = size_t(d.n) * d.h * d.w * d.c_in, ny = size_t(d.n) * d.out_h() * d.out_w() * d.c_out;
  const size_t nw = size_t(d.k) * d.k * d.c_in * d.c_out;
  auto x = std::make_shared<DevF>(randf(nx, 3)), w = std::make_shared<DevF>(randf(nw, 4));
  auto y = std::make_shared<DevF>(randf(ny, 5));  // dy for the backward passes
  auto out = std::make_shared<DevF>(std::vector<float>(pass == Pass::forward ? ny : pass == Pass::backward_data ? nx : nw, 0.0f));
  auto arena = std::make_shared<Arena>();
  arena_init_on(Device::cuda, *arena, G(p).conv2d_scratch_floats(d) * sizeof(float) + 4096);
  char shape[160];
  std::snprintf(shape, sizeof shape, "%s%dx%dx%d->%d k%ds%d n%d %s", precision_label(p).c_str(), d.h, d.w, d.c_in,
                d.c_out, d.k, d.stride, d.n, label);
  Case r{kConvOpNames[int(pass)], shape};
  r.flops = 2.0 * double(ny) * double(d.k) * d.k * d.c_in;
  r.bytes = kF * double(nx + ny + nw) + (pass == Pass::backward_weights ? kF * double(nw) : 0.0);
  const OpTable& g = G(p);
  const OpTable& cpu = C(p);
  r.run = [=, &g] {
    if (pass == Pass::forward) g.conv2d_forward(d, x->d(), w->d(), out->d(), *arena);
    else if (pass == Pass::backward_data) g.conv2d_backward_data(d, y->d(), w->d(), out->d(), *arena, false);
    else g.conv2d_backward_weights(d, x->d(), y->d(), out->d(), *arena);
  };
  r.check = [=, &g, &cpu] {
    out->reset();
    if (pass == Pass::forward) g.conv2d_forward(d, x->d(), w->d(), out->d(), *arena);
    else if (pass == Pass::backward_data) g.conv2d_backward_data(d, y->d(), w->d(), out->d(), *arena, false);
    else g.conv2d_backward_weights(d, x->d(), y->d(), out->d(), *arena);
    Arena ca;
    arena_init(ca, cpu.conv2d_scratch_floats(d) * sizeof(float) + 4096);
    std::vector<float> want = out->host;
    if (pass == Pass::forward) cpu.conv2d_forward(d, x->host.data(), w->host.data(), want.data(), ca);
    else if (pass == Pass::backward_data) cpu.conv2d_backward_data(d, y->host.data(), w->host.data(), want.data(), ca, false);
    else cpu.conv2d_backward_weights(d, x->host.data(), y->host.data(), want.data(), ca);
    return count_wrong(kConvOpNames[int(pass)], out->download(), want, rel_tolerance(p), abs_tolerance(p));
  };
  return r;
}

// ---- Batch norm (with the fused ReLU, as ResNet runs it) ----
enum class Bn { train, eval, backward };

Case bn_case(Bn which, int64_t rows, int c, const char* label) {
  const size_t n = size_t(rows) * size_t(c);
  auto x = std::make_shared<DevF>(randf(n, 6, 0.5f, 3.5f)), dy = std::make_shared<DevF>(randf(n, 7));
  auto gamma = std::make_shared<DevF>(randf(c, 8, 0.5f, 1.5f)), beta = std::make_shared<DevF>(randf(c, 9, -0.5f, 0.5f));
  auto rmean = std::make_shared<DevF>(randf(c, 10)), rvar = std::make_shared<DevF>(randf(c, 11, 0.5f, 2.0f));
  // The saved statistics and the forward output of the CPU: the backward's inputs on both devices.
  std::vector<float> sm(c), si(c), sy(n), rm = rmean->host, rv = rvar->host;
  C().batchnorm_forward_train(x->host.data(), rows, c, gamma->host.data(), beta->host.data(), 0.9f, 1e-5f, rm.data(),
                              rv.data(), sm.data(), si.data(), sy.data(), nullptr, true);
  auto mean = std::make_shared<DevF>(sm), invstd = std::make_shared<DevF>(si), y = std::make_shared<DevF>(sy);
  auto out = std::make_shared<DevF>(std::vector<float>(n, 0.0f));
  auto dgamma = std::make_shared<DevF>(std::vector<float>(c, 0.0f)), dbeta = std::make_shared<DevF>(std::vector<float>(c, 0.0f));
  auto arena = std::make_shared<Arena>();
  arena_init_on(Device::cuda, *arena, 4 * size_t(c) * sizeof(double) + 4096);
  const char* names[] = {"batchnorm_forward_train", "batchnorm_forward_eval", "batchnorm_backward"};
  Case r{names[int(which)], "rows " + std::to_string(rows) + " c " + std::to_string(c) + " relu " + label};
  const double N = double(n);
  r.bytes = kF * (which == Bn::train ? 3 * N : which == Bn::eval ? 2 * N : 7 * N);  // passes over [rows, c]
  r.flops = which == Bn::train ? 6 * N : which == Bn::eval ? 3 * N : 9 * N;
  r.run = [=] {
    if (which == Bn::train)
      G().batchnorm_forward_train(x->d(), rows, c, gamma->d(), beta->d(), 0.9f, 1e-5f, rmean->d(), rvar->d(),
                                  mean->d(), invstd->d(), out->d(), nullptr, true);
    else if (which == Bn::eval)
      G().batchnorm_forward_eval(x->d(), rows, c, gamma->d(), beta->d(), rmean->d(), rvar->d(), 1e-5f, out->d(),
                                 nullptr, true);
    else
      G().batchnorm_backward(x->d(), dy->d(), y->d(), rows, c, gamma->d(), mean->d(), invstd->d(), out->d(),
                             dgamma->d(), dbeta->d(), *arena);
  };
  r.check = [=] {
    for (auto* b : {rmean.get(), rvar.get(), mean.get(), invstd.get(), dgamma.get(), dbeta.get()}) b->reset();
    r.run();
    std::vector<float> want(n), wm = rmean->host, wv = rvar->host, m2(c), i2(c), dg(c, 0.0f), db(c, 0.0f);
    if (which == Bn::train) {
      C().batchnorm_forward_train(x->host.data(), rows, c, gamma->host.data(), beta->host.data(), 0.9f, 1e-5f,
                                  wm.data(), wv.data(), m2.data(), i2.data(), want.data(), nullptr, true);
      return count_wrong("batchnorm_forward_train y", out->download(), want, 1e-4, 1e-4) +
             count_wrong("batchnorm_forward_train save_invstd", invstd->download(), i2, 1e-4, 1e-4);
    }
    if (which == Bn::eval) {
      C().batchnorm_forward_eval(x->host.data(), rows, c, gamma->host.data(), beta->host.data(), wm.data(),
                                 wv.data(), 1e-5f, want.data(), nullptr, true);
      return count_wrong("batchnorm_forward_eval y", out->download(), want, 1e-5, 1e-5);
    }
    Arena ca;
    arena_init(ca, 4 * size_t(c) * sizeof(double) + 4096);
    C().batchnorm_backward(x->host.data(), dy->host.data(), y->host.data(), rows, c, gamma->host.data(),
                           mean->host.data(), invstd->host.data(), want.data(), dg.data(), db.data(), ca);
    return count_wrong("batchnorm_backward dx", out->download(), want, 1e-4, 1e-4) +
           count_wrong("batchnorm_backward dgamma", dgamma->download(), dg, 1e-4, 1e-4) +
           count_wrong("batchnorm_backward dbeta", dbeta->download(), db, 1e-4, 1e-4);
  };
  return r;
}

// ---- Elementwise ----
Case elementwise_case(const std::string& op, size_t n, const char* label) {
  auto a = std::make_shared<DevF>(randf(n, 12)), b = std::make_shared<DevF>(randf(n, 13));
  auto out = std::make_shared<DevF>(std::vector<float>(n, 0.0f));
  Case r{op, std::to_string(n) + " " + label};
  r.bytes = kF * double(n) * (op == "relu_forward" ? 2 : 3);
  r.flops = double(n) * (op == "add_relu_forward" ? 2 : 1);
  auto call = [op](const OpTable& t, const float* pa, const float* pb, float* po, size_t count) {
    if (op == "relu_forward") t.relu_forward(pa, po, count);
    else if (op == "relu_backward") t.relu_backward(pa, pb, po, count);
    else if (op == "add_forward") t.add_forward(pa, pb, po, count);
    else t.add_relu_forward(pa, pb, po, count);
  };
  r.run = [=] { call(G(), a->d(), b->d(), out->d(), n); };
  r.check = [=] {
    call(G(), a->d(), b->d(), out->d(), n);
    std::vector<float> want(n);
    call(C(), a->host.data(), b->host.data(), want.data(), n);
    return count_wrong(op.c_str(), out->download(), want, 0.0, 0.0);
  };
  return r;
}

// ---- Pooling ----
PoolDims pool_dims(int n, int h, int w, int c, int k, int s, int p) {
  PoolDims d;
  d.n = n, d.h = h, d.w = w, d.c = c, d.k = k, d.stride = s, d.pad = p;
  return d;
}

Case pool_case(const std::string& op, const PoolDims& d, const char* label) {
  const size_t nx = size_t(d.n) * d.h * d.w * d.c, ny = size_t(d.n) * d.out_h() * d.out_w() * d.c;
  auto x = std::make_shared<DevF>(randf(nx, 14)), dy = std::make_shared<DevF>(randf(ny, 15));
  const bool backward = op.find("backward") != std::string::npos;
  auto out = std::make_shared<DevF>(std::vector<float>(backward ? nx : ny, 0.0f));
  char shape[128];
  std::snprintf(shape, sizeof shape, "%dx%dx%d k%ds%dp%d n%d %s", d.h, d.w, d.c, d.k, d.stride, d.pad, d.n, label);
  Case r{op, shape};
  r.bytes = kF * double(nx + ny) * (op == "maxpool_backward" ? 1.5 : 1.0);  // max backward re-reads x
  r.flops = double(ny) * d.k * d.k;
  auto call = [op, d](const OpTable& t, const float* px, const float* pdy, float* po) {
    if (op == "maxpool_forward") t.maxpool_forward(d, px, po);
    else if (op == "maxpool_backward") t.maxpool_backward(d, px, pdy, po);
    else if (op == "avgpool_forward") t.avgpool_forward(d, px, po);
    else t.avgpool_backward(d, pdy, po);
  };
  r.run = [=] { call(G(), x->d(), dy->d(), out->d()); };
  r.check = [=] {
    r.run();
    std::vector<float> want(out->host.size());
    call(C(), x->host.data(), dy->host.data(), want.data());
    const bool exact = op == "maxpool_forward";  // max backward sums overlapping windows in any order
    return count_wrong(op.c_str(), out->download(), want, exact ? 0.0 : 1e-5, exact ? 0.0 : 1e-6);
  };
  return r;
}

Case global_pool_case(bool backward, int n, int hw, int c, const char* label) {
  const size_t nx = size_t(n) * hw * c, ny = size_t(n) * c;
  auto x = std::make_shared<DevF>(randf(nx, 16)), dy = std::make_shared<DevF>(randf(ny, 17));
  auto out = std::make_shared<DevF>(std::vector<float>(backward ? nx : ny, 0.0f));
  Case r{backward ? "global_avgpool_backward" : "global_avgpool_forward",
         std::to_string(n) + "x" + std::to_string(hw) + "x" + std::to_string(c) + " " + label};
  r.bytes = kF * double(nx + ny);
  r.flops = double(nx);
  r.run = [=] {
    if (backward) G().global_avgpool_backward(dy->d(), n, hw, c, out->d());
    else G().global_avgpool_forward(x->d(), n, hw, c, out->d());
  };
  r.check = [=] {
    r.run();
    std::vector<float> want(out->host.size());
    if (backward) C().global_avgpool_backward(dy->host.data(), n, hw, c, want.data());
    else C().global_avgpool_forward(x->host.data(), n, hw, c, want.data());
    return count_wrong(r.op.c_str(), out->download(), want, 1e-5, 1e-6);
  };
  return r;
}

// ---- Fully connected ----
Case linear_case(bool backward, int n, int in, int out, const char* label) {
  auto x = std::make_shared<DevF>(randf(size_t(n) * in, 18)), w = std::make_shared<DevF>(randf(size_t(in) * out, 19));
  auto b = std::make_shared<DevF>(randf(out, 20)), dy = std::make_shared<DevF>(randf(size_t(n) * out, 21));
  auto y = std::make_shared<DevF>(std::vector<float>(size_t(n) * out, 0.0f));
  auto dx = std::make_shared<DevF>(std::vector<float>(size_t(n) * in, 0.0f));
  auto dw = std::make_shared<DevF>(std::vector<float>(size_t(in) * out, 0.0f));
  auto db = std::make_shared<DevF>(std::vector<float>(out, 0.0f));
  Case r{backward ? "linear_backward" : "linear_forward",
         std::to_string(n) + "x" + std::to_string(in) + "->" + std::to_string(out) + " " + label};
  const double xs = double(n) * in, ws = double(in) * out, ys = double(n) * out;
  r.bytes = kF * (backward ? 2 * xs + 3 * ws + ys : xs + ws + ys);
  r.flops = (backward ? 4.0 : 2.0) * double(n) * in * out;
  r.run = [=] {
    if (backward) G().linear_backward(x->d(), dy->d(), n, in, out, w->d(), dx->d(), dw->d(), db->d());
    else G().linear_forward(x->d(), n, in, out, w->d(), b->d(), y->d());
  };
  r.check = [=] {
    dw->reset(), db->reset();
    r.run();
    if (!backward) {
      std::vector<float> want(y->host.size());
      C().linear_forward(x->host.data(), n, in, out, w->host.data(), b->host.data(), want.data());
      return count_wrong("linear_forward y", y->download(), want, 1e-4, 1e-4);
    }
    std::vector<float> wdx(dx->host.size()), wdw = dw->host, wdb = db->host;
    C().linear_backward(x->host.data(), dy->host.data(), n, in, out, w->host.data(), wdx.data(), wdw.data(), wdb.data());
    return count_wrong("linear_backward dx", dx->download(), wdx, 1e-4, 1e-4) +
           count_wrong("linear_backward dw", dw->download(), wdw, 1e-4, 1e-4) +
           count_wrong("linear_backward db", db->download(), wdb, 1e-4, 1e-4);
  };
  return r;
}

// ---- Softmax cross-entropy ----
Case xent_case(int n, int classes, const char* label) {
  auto z = std::make_shared<DevF>(randf(size_t(n) * classes, 22, -4.0f, 4.0f));
  auto labels = std::make_shared<DevI>(randi(n, 23, classes));
  auto dz = std::make_shared<DevF>(std::vector<float>(size_t(n) * classes, 0.0f));
  Case r{"softmax_xent", std::to_string(n) + "x" + std::to_string(classes) + " " + label};
  r.bytes = kF * 2.0 * n * classes;
  r.flops = 8.0 * n * classes;
  r.run = [=] {
    int correct = 0;
    G().softmax_xent(z->d(), labels->d(), n, classes, 0.1f, 1.0f / n, dz->d(), &correct);
  };
  r.check = [=] {
    int gc = -1, cc = -2;
    const double gl = G().softmax_xent(z->d(), labels->d(), n, classes, 0.1f, 1.0f / n, dz->d(), &gc);
    std::vector<float> want(dz->host.size());
    const double cl = C().softmax_xent(z->host.data(), labels->host.data(), n, classes, 0.1f, 1.0f / n, want.data(), &cc);
    return wrong_scalar("softmax_xent loss", gl, cl, 1e-5, 1e-5) + size_t(gc != cc) +
           count_wrong("softmax_xent dlogits", dz->download(), want, 1e-4, 1e-6 / n);
  };
  return r;
}

// ---- Optimizer updates ----
Case optim_case(const std::string& op, size_t n, const char* label) {
  auto p = std::make_shared<DevF>(randf(n, 24)), m = std::make_shared<DevF>(randf(n, 25, -0.01f, 0.01f));
  auto v = std::make_shared<DevF>(randf(n, 26, 0.0f, 0.01f));
  std::vector<float> gh = randf(n, 27, -0.01f, 0.01f);
  double live = 1.0;  // the share of gradients that are non-zero
  if (op == "lazy_adam_update") {  // embedding rows of 192 floats, 1 in 8 touched by the batch
    for (size_t i = 0; i < n; ++i)
      if ((i / 192) % 8 != 0) gh[i] = 0.0f;
    live = 1.0 / 8;
  }
  auto g = std::make_shared<DevF>(gh);
  Case r{op, std::to_string(n) + " " + label};
  const double N = double(n);
  if (op == "sgd_momentum_update") r.bytes = kF * 5 * N, r.flops = 6 * N;
  else if (op == "lars_update") r.bytes = kF * 7 * N, r.flops = 11 * N;
  else if (op == "sum_squares") r.bytes = kF * N, r.flops = 2 * N;
  else r.bytes = kF * (1 + 6 * live) * N, r.flops = 14 * live * N;  // adam: read g, then p, m, v in and out
  const float b1 = 0.9f, b2 = 0.999f, bias1 = 1.0f - 0.9f * 0.9f, bias2 = 1.0f - 0.999f * 0.999f;
  // trust: where lars_update leaves its trust ratio (the table's memory), null while timed.
  auto call = [=](const OpTable& t, float* pp, const float* pg, float* pm, float* pv, double* result, float* trust) {
    if (op == "sgd_momentum_update") t.sgd_momentum_update(pp, pg, pm, n, 0.1f, 0.9f, 5e-5f);
    else if (op == "lars_update") t.lars_update(pp, pg, pm, n, 5.0f, 0.9f, 5e-5f, 0.001f, 0.0f, false, trust);
    else if (op == "adam_update") t.adam_update(pp, pg, pm, pv, n, 0.001f, b1, b2, 1e-8f, bias1, bias2);
    else if (op == "lazy_adam_update") t.lazy_adam_update(pp, pg, pm, pv, n, 0.001f, b1, b2, 1e-8f, bias1, bias2);
    else *result = t.sum_squares(pp, n);
  };
  r.run = [=] {
    double unused = 0;
    call(G(), p->d(), g->d(), m->d(), v->d(), &unused, nullptr);
  };
  r.check = [=] {
    p->reset(), m->reset(), v->reset();
    double gres = 0, cres = 0;
    DevF gtrust(std::vector<float>(1, 0.0f));
    float ctrust = 0.0f;
    call(G(), p->d(), g->d(), m->d(), v->d(), &gres, gtrust.d());
    std::vector<float> wp = p->host, wm = m->host, wv = v->host;
    call(C(), wp.data(), g->host.data(), wm.data(), wv.data(), &cres, &ctrust);
    if (op == "lars_update") gres = gtrust.download()[0], cres = ctrust;
    if (op == "sum_squares") return wrong_scalar("sum_squares", gres, cres, 1e-10, 0.0);
    size_t wrong = wrong_scalar("lars trust", gres, cres, 1e-6, 0.0);
    wrong += count_wrong((op + " p").c_str(), p->download(), wp, 1e-5, 1e-6);
    wrong += count_wrong((op + " m").c_str(), m->download(), wm, 1e-5, 1e-7);
    wrong += count_wrong((op + " v").c_str(), v->download(), wv, 1e-5, 1e-9);
    return wrong;
  };
  return r;
}

// ---- NCF: embeddings, GMF, sigmoid + BCE ----
Case gather_case(int rows, int dim, int n, int ld, const char* label) {
  auto table = std::make_shared<DevF>(randf(size_t(rows) * dim, 28));
  auto idx = std::make_shared<DevI>(randi(n, 29, rows));
  auto out = std::make_shared<DevF>(std::vector<float>(size_t(n) * ld, 0.0f));
  Case r{"embedding_gather", std::to_string(n) + " of " + std::to_string(rows) + "x" + std::to_string(dim) + " ld " +
                                 std::to_string(ld) + " " + label};
  r.bytes = kF * 2.0 * n * dim + 4.0 * n;
  r.flops = 0;
  r.run = [=] { G().embedding_gather(table->d(), dim, idx->d(), n, out->d(), ld); };
  r.check = [=] {
    r.run();
    std::vector<float> want = out->host;
    C().embedding_gather(table->host.data(), dim, idx->host.data(), n, want.data(), ld);
    return count_wrong("embedding_gather", out->download(), want, 0.0, 0.0);
  };
  return r;
}

Case scatter_case(int rows, int dim, int n, int ld, const char* label) {
  auto table = std::make_shared<DevF>(std::vector<float>(size_t(rows) * dim, 0.0f));
  auto idx = std::make_shared<DevI>(randi(n, 30, rows));
  auto src = std::make_shared<DevF>(randf(size_t(n) * ld, 31));
  const size_t touched = std::unordered_set<int32_t>(idx->host.begin(), idx->host.end()).size();
  Case r{"embedding_scatter_add", std::to_string(n) + " into " + std::to_string(rows) + "x" + std::to_string(dim) +
                                      " ld " + std::to_string(ld) + " " + label};
  // src once, the touched rows read and written, the indices (the sort's passes not counted).
  r.bytes = kF * (double(n) * dim + 2.0 * double(touched) * dim) + 4.0 * n;
  r.flops = double(n) * dim;
  r.run = [=] { G().embedding_scatter_add(table->d(), dim, idx->d(), n, src->d(), ld); };
  r.check = [=] {
    table->reset();
    r.run();
    std::vector<float> want = table->host;
    C().embedding_scatter_add(want.data(), dim, idx->host.data(), n, src->host.data(), ld);
    return count_wrong("embedding_scatter_add (bit-exact)", table->download(), want, 0.0, 0.0);
  };
  return r;
}

Case gmf_case(bool backward, int n, int dim, const char* label) {
  auto a = std::make_shared<DevF>(randf(size_t(n) * dim, 32)), b = std::make_shared<DevF>(randf(size_t(n) * dim, 33));
  auto dy = std::make_shared<DevF>(randf(size_t(n) * dim, 34));
  auto o1 = std::make_shared<DevF>(std::vector<float>(size_t(n) * dim, 0.0f)), o2 = std::make_shared<DevF>(o1->host);
  Case r{backward ? "gmf_backward" : "gmf_forward", std::to_string(n) + "x" + std::to_string(dim) + " " + label};
  r.bytes = kF * double(n) * dim * (backward ? 5 : 3);
  r.flops = double(n) * dim * (backward ? 2 : 1);
  r.run = [=] {
    if (backward) G().gmf_backward(a->d(), dim, b->d(), dim, dy->d(), dim, n, dim, o1->d(), o2->d());
    else G().gmf_forward(a->d(), dim, b->d(), dim, n, dim, o1->d(), dim);
  };
  r.check = [=] {
    r.run();
    std::vector<float> w1(o1->host.size()), w2(o2->host.size());
    if (backward) C().gmf_backward(a->host.data(), dim, b->host.data(), dim, dy->host.data(), dim, n, dim, w1.data(), w2.data());
    else C().gmf_forward(a->host.data(), dim, b->host.data(), dim, n, dim, w1.data(), dim);
    return count_wrong(r.op.c_str(), o1->download(), w1, 0.0, 0.0) +
           (backward ? count_wrong("gmf_backward db", o2->download(), w2, 0.0, 0.0) : 0);
  };
  return r;
}

Case bce_case(int n, const char* label) {
  auto z = std::make_shared<DevF>(randf(n, 35, -8.0f, 8.0f));
  std::vector<float> yh(n);
  for (int i = 0; i < n; ++i) yh[i] = float(rng_below(77, 36, uint64_t(i), 5) == 0);  // 1 positive : 4 negatives
  auto y = std::make_shared<DevF>(yh);
  auto dz = std::make_shared<DevF>(std::vector<float>(n, 0.0f));
  Case r{"sigmoid_bce", std::to_string(n) + " " + label};
  r.bytes = kF * 3.0 * n;
  r.flops = 12.0 * n;
  r.run = [=] { G().sigmoid_bce(z->d(), y->d(), n, 1.0f / n, dz->d()); };
  r.check = [=] {
    const double gs = G().sigmoid_bce(z->d(), y->d(), n, 1.0f / n, dz->d());
    std::vector<float> want(n);
    const double cs = C().sigmoid_bce(z->host.data(), y->host.data(), n, 1.0f / n, want.data());
    return wrong_scalar("sigmoid_bce sum", gs, cs, 1e-6, 1e-6) +
           count_wrong("sigmoid_bce dlogits", dz->download(), want, 1e-5, 1e-6 / n);
  };
  return r;
}

// Every measured (op, shape), in table order.
std::vector<Entry> all_entries() {
  std::vector<Entry> e;
  auto add = [&](const std::string& op, std::function<Case()> make) { e.push_back({op, std::move(make)}); };
  add("gemm", [] { return gemm_case(false, false, 2048, 2048, 2048, "square"); });
  add("gemm", [] { return gemm_case(true, false, 2048, 1000, 32, "rn50 fc dW"); });
  // ResNet-50 (n = 32 per GPU) and ResNet-20 mini (n = 128), every pass.
  const std::pair<ConvDims, const char*> convs[] = {
      {dims(32, 224, 224, 3, 64, 7, 2, 3), "rn50 stem"},      {dims(32, 56, 56, 64, 64, 3, 1, 1), "rn50 s1"},
      {dims(32, 56, 56, 64, 256, 1, 1, 0), "rn50 s1 expand"}, {dims(32, 56, 56, 128, 128, 3, 2, 1), "rn50 s2 down"},
      {dims(32, 14, 14, 256, 256, 3, 1, 1), "rn50 s3"},       {dims(32, 14, 14, 1024, 2048, 1, 2, 0), "rn50 s4 proj"},
      {dims(32, 7, 7, 512, 2048, 1, 1, 0), "rn50 s4 expand"}, {dims(128, 28, 28, 1, 16, 3, 1, 1), "rn20 stem"},
      {dims(128, 28, 28, 16, 16, 3, 1, 1), "rn20 s1"},        {dims(128, 7, 7, 64, 64, 3, 1, 1), "rn20 s3"}};
  for (Pass p : {Pass::forward, Pass::backward_data, Pass::backward_weights})
    for (const auto& [d, label] : convs)
      add(kConvOpNames[int(p)], [p, d = d, label = label] { return conv_case(p, d, label); });
  // The same on the bf16 table (--precision bf16: the GEMM on bf16 tensor cores, convolutions on TF32).
  add("gemm", [] { return gemm_case(false, false, 2048, 2048, 2048, "square", Precision::bf16); });
  for (Pass p : {Pass::forward, Pass::backward_data, Pass::backward_weights})
    for (int i : {1, 4, 5})
      add(kConvOpNames[int(p)], [p, d = convs[i].first, label = convs[i].second] {
        return conv_case(p, d, label, Precision::bf16);
      });
  const std::pair<int64_t, int> bns[] = {{32 * 112 * 112, 64}, {32 * 56 * 56, 256}, {32 * 7 * 7, 2048}, {128 * 28 * 28, 16}};
  for (Bn w : {Bn::train, Bn::eval, Bn::backward})
    for (const auto& [rows, c] : bns) {
      const char* names[] = {"batchnorm_forward_train", "batchnorm_forward_eval", "batchnorm_backward"};
      add(names[int(w)], [w, rows = rows, c = c] { return bn_case(w, rows, c, c == 16 ? "rn20" : "rn50"); });
    }
  for (const char* op : {"relu_forward", "relu_backward", "add_forward", "add_relu_forward"})
    add(op, [op] { return elementwise_case(op, size_t(32) * 56 * 56 * 256, "rn50 s1 block out"); });
  for (const char* op : {"maxpool_forward", "maxpool_backward"})
    add(op, [op] { return pool_case(op, pool_dims(32, 112, 112, 64, 3, 2, 1), "rn50 stem pool"); });
  for (const char* op : {"avgpool_forward", "avgpool_backward"})
    add(op, [op] { return pool_case(op, pool_dims(32, 56, 56, 64, 2, 2, 0), "(no model uses it)"); });
  add("global_avgpool_forward", [] { return global_pool_case(false, 32, 49, 2048, "rn50 head"); });
  add("global_avgpool_backward", [] { return global_pool_case(true, 32, 49, 2048, "rn50 head"); });
  add("linear_forward", [] { return linear_case(false, 32, 2048, 1000, "rn50 fc"); });
  add("linear_backward", [] { return linear_case(true, 32, 2048, 1000, "rn50 fc"); });
  add("linear_forward", [] { return linear_case(false, 131072, 256, 256, "ncf mlp1"); });
  add("linear_backward", [] { return linear_case(true, 131072, 256, 256, "ncf mlp1"); });
  add("softmax_xent", [] { return xent_case(32, 1000, "rn50"); });
  add("softmax_xent", [] { return xent_case(128, 10, "rn20"); });
  add("sgd_momentum_update", [] { return optim_case("sgd_momentum_update", 25557032, "rn50 params"); });
  add("lars_update", [] { return optim_case("lars_update", 25557032, "rn50 params, one view"); });
  add("lars_update", [] { return optim_case("lars_update", 2359296, "rn50 3x3x512x512 view"); });
  add("sum_squares", [] { return optim_case("sum_squares", 25557032, "rn50 grads"); });
  add("adam_update", [] { return optim_case("adam_update", 31782528, "ncf ml-20m params"); });
  add("lazy_adam_update", [] { return optim_case("lazy_adam_update", 31782528, "ncf, 1/8 rows live"); });
  add("embedding_gather", [] { return gather_case(138493, 64, 131072, 64, "ncf gmf users"); });
  add("embedding_gather", [] { return gather_case(138493, 128, 131072, 256, "ncf mlp users"); });
  add("embedding_scatter_add", [] { return scatter_case(26744, 64, 131072, 64, "ncf gmf items"); });
  add("embedding_scatter_add", [] { return scatter_case(138493, 128, 131072, 256, "ncf mlp users"); });
  add("embedding_scatter_add", [] { return scatter_case(138493, 64, 1048576, 64, "ncf 1M batch users"); });
  add("gmf_forward", [] { return gmf_case(false, 131072, 64, "ncf"); });
  add("gmf_backward", [] { return gmf_case(true, 131072, 64, "ncf"); });
  add("sigmoid_bce", [] { return bce_case(131072, "ncf"); });
  add("sigmoid_bce", [] { return bce_case(1048576, "ncf 1M"); });
  return e;
}

// Device peaks: DRAM bytes/s = 2 (double data rate) x memory clock x bus width; fp32 FLOP/s =
// 2 (FMA) x fp32 lanes per SM x SMs x SM clock.
struct Peak {
  double bytes_per_s = 0, flops = 0;
};
Peak device_peak(int ordinal) {
  cudaDeviceProp p{};
  int mem_khz = 0, sm_khz = 0;
  if (cudaGetDeviceProperties(&p, ordinal) != cudaSuccess ||
      cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, ordinal) != cudaSuccess ||
      cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, ordinal) != cudaSuccess)
    return {};
  const int lanes = (p.major == 8 && p.minor == 0) || p.major < 8 ? 64 : 128;  // A100: 64; H100/H200/B200: 128
  return {2.0 * mem_khz * 1e3 * p.memoryBusWidth / 8.0, 2.0 * lanes * p.multiProcessorCount * sm_khz * 1e3};
}

void usage(FILE* f) {
  std::fprintf(f,
               "usage: kernels_cuda [--op NAME]... [--iters N] [--help]\n"
               "  Checks each CUDA op once against the CPU op (exit 1 if wrong), then times it.\n"
               "  --op NAME  only this op (repeatable), e.g. --op conv2d_forward --op embedding_scatter_add\n"
               "  --iters N  timed calls per (op, shape), default 20 (fewer where they would take over 2 s)\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::set<std::string> only;
  int iters = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    }
    if (a == "--op" && i + 1 < argc) {
      only.insert(argv[++i]);
    } else if (a == "--iters" && i + 1 < argc) {
      iters = std::atoi(argv[++i]);
      if (iters < 1) {
        std::fprintf(stderr, "kernels_cuda: --iters must be at least 1\n");
        return 2;
      }
    } else {
      usage(stderr);
      return 2;
    }
  }
  std::vector<Entry> entries = all_entries();
  for (const auto& name : only)
    if (std::none_of(entries.begin(), entries.end(), [&](const Entry& e) { return e.op == name; })) {
      std::fprintf(stderr, "kernels_cuda: --op %s: no such op is measured\n", name.c_str());
      return 2;
    }
  if (cuda_device_count() == 0) {
    std::printf("kernels_cuda: no GPU visible; nothing measured\n");
    return 0;
  }
  try {
    const DeviceContext ctx = open_device(Device::cuda, 0);
    const Peak peak = device_peak(ctx.ordinal);
    std::printf("kernels_cuda: %s | peak %.0f GB/s (2 x memory clock x bus width), %.1f TFLOP/s fp32 "
                "(2 x lanes x SMs x clock; bf16 rows run on tensor cores and may pass 100%%) | %d timed calls "
                "each\n",
                ctx.description.c_str(), peak.bytes_per_s / 1e9, peak.flops / 1e12, iters);
    std::printf("%-24s %-44s %10s %10s %13s %9s %9s %6s %6s %6s\n", "op", "shape", "us/call", "MB(napkin)",
                "MFLOP(napkin)", "GB/s", "GFLOP/s", "%BW", "%FP32", "#wrong");
    size_t total_wrong = 0;
    for (const Entry& e : entries) {
      if (!only.empty() && !only.count(e.op)) continue;
      Case c = e.make();
      const size_t wrong = c.check();
      total_wrong += wrong;
      // Warm-up, and an estimate that caps the timed calls at about 2 s.
      using clock = std::chrono::steady_clock;
      auto t0 = clock::now();
      c.run();
      synchronize(Device::cuda);
      const double one = std::chrono::duration<double>(clock::now() - t0).count();
      const int calls = std::max(1, int(std::min<double>(iters, 2.0 / std::max(one, 1e-9))));
      t0 = clock::now();
      for (int k = 0; k < calls; ++k) c.run();  // back to back: launch latency overlaps
      synchronize(Device::cuda);
      const double seconds = std::chrono::duration<double>(clock::now() - t0).count();
      const double per_call = seconds / calls;
      const double gbs = c.bytes / per_call / 1e9, gflops = c.flops / per_call / 1e9;
      std::printf("%-24s %-44s %10.1f %10.2f %13.1f %9.1f %9.1f %6.1f %6.1f %6zu\n", c.op.c_str(), c.shape.c_str(),
                  per_call * 1e6, c.bytes / 1e6, c.flops / 1e6, gbs, gflops,
                  peak.bytes_per_s > 0 ? 100.0 * c.bytes / per_call / peak.bytes_per_s : 0.0,
                  peak.flops > 0 ? 100.0 * c.flops / per_call / peak.flops : 0.0, wrong);
      std::fflush(stdout);
    }
    close_device(ctx);
    if (total_wrong) {
      std::fprintf(stderr, "kernels_cuda: %zu wrong values: a CUDA op disagrees with its CPU op\n", total_wrong);
      return 1;
    }
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "kernels_cuda: error: %s\n", ex.what());
    return 1;
  }
  return 0;
}

#else  // no CUDA in this build

#include <cstdio>

int main() {
  std::printf("kernels_cuda: this build has no CUDA\n");
  return 0;
}

#endif
