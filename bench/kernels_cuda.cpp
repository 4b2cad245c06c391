// How fast is each CUDA op at the shapes the workloads run, and how close is it to what the GPU
// can do? Shapes per GPU: ResNet-50 at 32 images, ResNet-20 "mini" at 128, NCF at 131072 samples
// and a 1M-sample scatter; for the others a mini config's batch at its calibrated 2 ranks and the
// reference's global batch over 8 GPUs: the transformer (mini d256 at 32 pairs, big d1024 at 256,
// at the longest sequences the model is built for, 64 and 256 tokens; decoding 32 or 64 sentences
// x beam 4), GNMT (hidden 256 at 16 pairs of 64 tokens, 1024 at 128 of 75), Mask R-CNN (mini at 16
// scenes, R-50-FPN at 2 800x800 images), SSD (mini and SSD300 at 32 images) and MiniGo 9x9 (32 and
// 1024 positions). Each op is first checked once against its CPU op (kernels/cpu) on the same
// inputs: a wrong result is reported in the #wrong column and the run exits 1. Then it is timed on
// the host around a device synchronize, and its bytes and FLOPs (napkin math, printed) give GB/s,
// GFLOP/s and the share of the device's peak (from cudaGetDeviceProperties).
// Usage: kernels_cuda [--op NAME]... [--skip-op NAME]... [--iters N] [--help]
#ifdef MLPD_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
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
#include "core/bf16.h"
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
// Shared, so that a case's run and check closures hold the same device buffers.
template <typename T>
std::shared_ptr<Dev<T>> on_gpu(std::vector<T> host) {
  return std::make_shared<Dev<T>>(std::move(host));
}
std::shared_ptr<DevF> gpu_zeros(size_t n) { return on_gpu(std::vector<float>(n, 0.0f)); }

// Where a CUDA loss op adds its sum (kernels/op_signatures.inc: loss ops ADD to doubles of the op's
// memory): `count` device doubles, zeroed on allocation. The timed runs keep adding into them; a
// check zeroes them, runs the op and reads them back (a wait for the queued work).
struct DevSum {
  size_t count;
  DeviceBytes bytes;
  explicit DevSum(size_t c) : count(c), bytes(alloc_on(Device::cuda, c * sizeof(double))) { zero(); }
  double* d() const { return as<double>(bytes); }
  void zero() { zero_on(Device::cuda, d(), count * sizeof(double)); }
  std::vector<double> download() const {
    std::vector<double> h(count);
    copy_to_host(Device::cuda, h.data(), d(), count * sizeof(double));
    return h;
  }
  double read() const { return download()[0]; }
};
std::shared_ptr<DevSum> gpu_loss_sum(size_t count = 1) { return std::make_shared<DevSum>(count); }

// Scratch for an op that takes an Arena: each device's *_scratch_floats is its own, so the CUDA op
// gets its table's count in device memory and the CPU op its own in host memory (slack for alignment).
std::shared_ptr<Arena> gpu_arena(size_t floats) {
  auto a = std::make_shared<Arena>();
  arena_init_on(Device::cuda, *a, floats * sizeof(float) + 4096);
  return a;
}
Arena cpu_arena(size_t floats) {
  Arena a;
  arena_init(a, floats * sizeof(float) + 4096);
  return a;
}

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
// count_wrong with abs a fraction of the largest |want| (tests/gpu's close_scaled): for sums whose
// terms cancel, where a value near 0 carries the rounding of the large terms.
size_t count_wrong_scaled(const char* what, const std::vector<float>& got, const std::vector<float>& want, double rel,
                          double abs_frac) {
  double largest = 0.0;
  for (float w : want) largest = std::max(largest, double(std::fabs(w)));
  return count_wrong(what, got, want, rel, std::max(1e-30, abs_frac * largest));
}
// Decisions (masks, labels, kept indices, counts) must be equal; names the first difference.
template <typename T>
size_t count_unequal(const char* what, const std::vector<T>& got, const std::vector<T>& want) {
  size_t wrong = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] == want[i]) continue;
    if (wrong++ == 0)
      std::fprintf(stderr, "kernels_cuda: %s: [%zu] got %lld, want %lld\n", what, i, static_cast<long long>(got[i]),
                   static_cast<long long>(want[i]));
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
constexpr double kExp = 4;  // napkin FLOPs of one exp, log, tanh or sigmoid

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
  auto loss = gpu_loss_sum();
  Case r{"softmax_xent", std::to_string(n) + "x" + std::to_string(classes) + " " + label};
  r.bytes = kF * 2.0 * n * classes;
  r.flops = 8.0 * n * classes;
  r.run = [=] {
    int correct = 0;
    G().softmax_xent(z->d(), labels->d(), n, classes, 0.1f, 1.0f / n, dz->d(), loss->d(), &correct);
  };
  r.check = [=] {
    int gc = -1, cc = -2;
    loss->zero();
    G().softmax_xent(z->d(), labels->d(), n, classes, 0.1f, 1.0f / n, dz->d(), loss->d(), &gc);
    const double gl = loss->read();
    std::vector<float> want(dz->host.size());
    double cl = 0.0;
    C().softmax_xent(z->host.data(), labels->host.data(), n, classes, 0.1f, 1.0f / n, want.data(), &cl, &cc);
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
  // trust: where lars_update leaves its trust ratio (the table's memory), null while timed; result:
  // where sum_squares adds its sum (the table's memory).
  auto sum = gpu_loss_sum();
  auto call = [=](const OpTable& t, float* pp, const float* pg, float* pm, float* pv, double* result, float* trust) {
    if (op == "sgd_momentum_update") t.sgd_momentum_update(pp, pg, pm, n, 0.1f, 0.9f, 5e-5f);
    else if (op == "lars_update") t.lars_update(pp, pg, pm, n, 5.0f, 0.9f, 5e-5f, 0.001f, 0.0f, false, trust);
    else if (op == "adam_update") t.adam_update(pp, pg, pm, pv, n, 0.001f, b1, b2, 1e-8f, bias1, bias2);
    else if (op == "lazy_adam_update") t.lazy_adam_update(pp, pg, pm, pv, n, 0.001f, b1, b2, 1e-8f, bias1, bias2);
    else t.sum_squares(pp, n, result);
  };
  r.run = [=] { call(G(), p->d(), g->d(), m->d(), v->d(), sum->d(), nullptr); };
  r.check = [=] {
    p->reset(), m->reset(), v->reset();
    double gres = 0, cres = 0;
    DevF gtrust(std::vector<float>(1, 0.0f));
    float ctrust = 0.0f;
    sum->zero();
    call(G(), p->d(), g->d(), m->d(), v->d(), sum->d(), gtrust.d());
    if (op == "sum_squares") gres = sum->read();
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
  auto loss = gpu_loss_sum();
  Case r{"sigmoid_bce", std::to_string(n) + " " + label};
  r.bytes = kF * 3.0 * n;
  r.flops = 12.0 * n;
  r.run = [=] { G().sigmoid_bce(z->d(), y->d(), n, 1.0f / n, dz->d(), loss->d()); };
  r.check = [=] {
    loss->zero();
    G().sigmoid_bce(z->d(), y->d(), n, 1.0f / n, dz->d(), loss->d());
    const double gs = loss->read();
    std::vector<float> want(n);
    double cs = 0.0;
    C().sigmoid_bce(z->host.data(), y->host.data(), n, 1.0f / n, want.data(), &cs);
    return wrong_scalar("sigmoid_bce sum", gs, cs, 1e-6, 1e-6) +
           count_wrong("sigmoid_bce dlogits", dz->download(), want, 1e-5, 1e-6 / n);
  };
  return r;
}

// ================= Translation (transformer, gnmt): sequences are [batch, len, width] rows =================

// Lengths of a padded batch: row 0 at hi (the row that set the padded length), the others drawn in [lo, hi].
std::vector<int32_t> padded_lengths(int batch, int lo, int hi, uint64_t stream) {
  std::vector<int32_t> v(size_t(batch), hi);
  for (int b = 1; b < batch; ++b)
    v[size_t(b)] = lo + int32_t(rng_below(77, stream, uint64_t(b), uint64_t(hi - lo + 1)));
  return v;
}

// ---- Layer norm (the transformer's post-norm, rows = tokens) ----
Case layernorm_case(bool backward, int64_t rows, int d, const char* label) {
  const size_t n = size_t(rows) * size_t(d);
  std::vector<float> xh = randf(n, 40, -2.0f, 2.0f);
  for (size_t i = 0; i < n; ++i) xh[i] += float((i / size_t(d)) % 5);  // rows with different means
  auto x = on_gpu(std::move(xh)), dy = on_gpu(randf(backward ? n : 1, 41));
  auto gamma = on_gpu(randf(d, 42, 0.5f, 1.5f)), beta = on_gpu(randf(d, 43));
  // The CPU's saved statistics: the backward's inputs on both devices (forward: its outputs).
  std::vector<float> sm(size_t(rows), 0.0f), si(size_t(rows), 0.0f);
  if (backward) {
    std::vector<float> y(n);
    C().layernorm_forward(x->host.data(), rows, d, gamma->host.data(), beta->host.data(), 1e-5f, y.data(), sm.data(),
                          si.data());
  }
  auto mean = on_gpu(std::move(sm)), invstd = on_gpu(std::move(si));
  auto out = gpu_zeros(n), dgamma = gpu_zeros(d), dbeta = gpu_zeros(d);
  Case r{backward ? "layernorm_backward" : "layernorm_forward",
         "rows " + std::to_string(rows) + " d " + std::to_string(d) + " " + label};
  const double N = double(n), R = double(rows), D = double(d);
  // forward: x in, y out, gamma, beta, the two statistics out; backward: x, dy in, dx out, gamma and the
  // statistics in, dgamma and dbeta read and written.
  r.bytes = kF * (backward ? 3 * N + 2 * R + 5 * D : 2 * N + 2 * R + 2 * D);
  r.flops = backward ? 13 * N : 8 * N;
  r.run = [=] {
    if (backward)
      G().layernorm_backward(x->d(), dy->d(), rows, d, gamma->d(), mean->d(), invstd->d(), out->d(), dgamma->d(),
                             dbeta->d(), false);
    else
      G().layernorm_forward(x->d(), rows, d, gamma->d(), beta->d(), 1e-5f, out->d(), mean->d(), invstd->d());
  };
  r.check = [=] {
    dgamma->reset(), dbeta->reset();
    r.run();
    std::vector<float> want(n);
    if (!backward) {
      std::vector<float> wm(static_cast<size_t>(rows)), wi(static_cast<size_t>(rows));
      C().layernorm_forward(x->host.data(), rows, d, gamma->host.data(), beta->host.data(), 1e-5f, want.data(),
                            wm.data(), wi.data());
      return count_wrong("layernorm_forward y", out->download(), want, 1e-5, 1e-5) +
             count_wrong("layernorm_forward save_mean", mean->download(), wm, 1e-5, 1e-6) +
             count_wrong("layernorm_forward save_invstd", invstd->download(), wi, 1e-5, 1e-6);
    }
    std::vector<float> dg = dgamma->host, db = dbeta->host;
    C().layernorm_backward(x->host.data(), dy->host.data(), rows, d, gamma->host.data(), mean->host.data(),
                           invstd->host.data(), want.data(), dg.data(), db.data(), false);
    return count_wrong("layernorm_backward dx", out->download(), want, 1e-4, 1e-4) +
           count_wrong("layernorm_backward dgamma", dgamma->download(), dg, 1e-4, 1e-4) +
           count_wrong("layernorm_backward dbeta", dbeta->download(), db, 1e-4, 1e-4);
  };
  return r;
}

// ---- Dropout: the mask is a function of (seed, offset + i) on both devices, so all of it is exact ----
Case dropout_case(bool backward, size_t n, float p, const char* label) {
  constexpr uint64_t kSeed = 1234, kOffset = uint64_t(1) << 33;  // an offset deep into a step's elements
  auto x = on_gpu(randf(n, 44)), y = gpu_zeros(n);  // x is dy backward
  // The CPU's mask: the backward's input on both devices (forward: the mask is an output).
  std::vector<uint8_t> mh(n, 0);
  if (backward) {
    std::vector<float> yh(n);
    C().dropout_forward(x->host.data(), n, p, kSeed, kOffset, yh.data(), mh.data());
  }
  auto mask = on_gpu(std::move(mh));
  char shape[96];
  std::snprintf(shape, sizeof shape, "%zu p%.1f %s", n, double(p), label);
  Case r{backward ? "dropout_backward" : "dropout_forward", shape};
  r.bytes = (2 * kF + 1) * double(n);  // x (or dy) in, y (or dx) out, a byte of mask out (or in)
  r.flops = double(n) * (backward ? 1 : 2);
  r.run = [=] {
    if (backward) G().dropout_backward(x->d(), mask->d(), n, p, y->d());
    else G().dropout_forward(x->d(), n, p, kSeed, kOffset, y->d(), mask->d());
  };
  r.check = [=] {
    r.run();
    std::vector<float> want(n);
    if (backward) {
      C().dropout_backward(x->host.data(), mask->host.data(), n, p, want.data());
      return count_wrong("dropout_backward dx", y->download(), want, 0.0, 0.0);
    }
    std::vector<uint8_t> wmask(n);
    C().dropout_forward(x->host.data(), n, p, kSeed, kOffset, want.data(), wmask.data());
    return count_unequal("dropout_forward mask", mask->download(), wmask) +
           count_wrong("dropout_forward y", y->download(), want, 0.0, 0.0);
  };
  return r;
}

// ---- Token embedding with sinusoidal positions (the transformer's shared table) ----
Case token_embedding_case(bool backward, int vocab, int dim, int batch, int len, const char* label) {
  const size_t rows = size_t(batch) * len, n = rows * dim;
  auto table = on_gpu(randf(size_t(vocab) * dim, 45));  // backward: dtable, accumulated onto
  auto tokens = on_gpu(randi(rows, 46, vocab));
  auto dout = on_gpu(randf(backward ? n : 1, 47)), out = gpu_zeros(backward ? 1 : n);
  const float scale = std::sqrt(float(dim));
  const size_t touched = std::unordered_set<int32_t>(tokens->host.begin(), tokens->host.end()).size();
  char shape[96];
  std::snprintf(shape, sizeof shape, "%dx%d from %dx%d %s", batch, len, vocab, dim, label);
  Case r{backward ? "token_embedding_backward" : "token_embedding_forward", shape};
  // forward: the tokens, a table row per token, out; backward: dout, the tokens, the touched rows read and
  // written (the sort's passes not counted). The position's sine is computed per element.
  r.bytes = backward ? kF * (double(n) + 2.0 * double(touched) * dim) + 4.0 * double(rows)
                     : kF * 2.0 * double(n) + 4.0 * double(rows);
  r.flops = backward ? 2.0 * double(n) : (2 + kExp) * double(n);
  r.run = [=] {
    if (backward) G().token_embedding_backward(table->d(), dim, tokens->d(), int(rows), scale, dout->d());
    else G().token_embedding_forward(table->d(), dim, tokens->d(), batch, len, scale, 0, true, out->d());
  };
  r.check = [=] {
    table->reset();
    r.run();
    if (backward) {
      std::vector<float> want = table->host;
      C().token_embedding_backward(want.data(), dim, tokens->host.data(), int(rows), scale, dout->host.data());
      return count_wrong("token_embedding_backward dtable", table->download(), want, 1e-5, 1e-5);
    }
    std::vector<float> want(n);
    C().token_embedding_forward(table->host.data(), dim, tokens->host.data(), batch, len, scale, 0, true, want.data());
    return count_wrong("token_embedding_forward out", out->download(), want, 1e-6, 1e-6);
  };
  return r;
}

// ---- Fused multi-head attention ----
enum class Attn { forward, forward_bf16_kv, backward };
const char* const kAttnOpNames[] = {"attention_forward", "attention_forward_bf16_kv", "attention_backward"};

// One attention call as transformer_model.cpp makes it. Self-attention reads q, k and v as column
// blocks of the fused QKV projection [batch, len, 3*width]; cross-attention and decoding read q
// [batch, q_len, ldq] and k | v side by side in [batch, k_len, 2*width] (the cross projection, or
// the decoder's key/value cache, max_decode_len keys of which the first `step + 1` are live).
struct AttnShape {
  const char* label;
  AttentionDims d;
  bool fused;
  int ldq;             // q's row stride where not fused
  int len_lo, len_hi;  // key lengths (padded_lengths)
};

Case attention_case(Attn which, const AttnShape& s) {
  const AttentionDims d = s.d;
  const bool backward = which == Attn::backward, bf16 = which == Attn::forward_bf16_kv;
  const int w = d.heads * d.head_dim, ldq = s.fused ? 3 * w : s.ldq, ldkv = s.fused ? 3 * w : 2 * w, ldo = w;
  // One buffer: q, then (unless fused) k | v.
  const size_t q_size = size_t(d.batch) * d.q_len * ldq;
  const size_t size = s.fused ? q_size : q_size + size_t(d.batch) * d.k_len * ldkv;
  const size_t koff = s.fused ? size_t(w) : q_size, voff = koff + size_t(w);
  const size_t nprobs = size_t(d.batch) * d.heads * d.q_len * d.k_len, nout = size_t(d.batch) * d.q_len * ldo;
  auto x = on_gpu(randf(size, 48, -2.0f, 2.0f));
  auto lengths = on_gpu(padded_lengths(d.batch, s.len_lo, s.len_hi, 49));
  std::vector<uint16_t> x16h(bf16 ? size : 1);
  if (bf16)
    for (size_t i = 0; i < size; ++i) x16h[i] = f32_to_bf16(x->host[i]);
  auto x16 = on_gpu(std::move(x16h));
  // The backward differentiates the CPU's forward: its probabilities are the input on both devices.
  std::vector<float> ph(nprobs, 0.0f);
  if (backward) {
    std::vector<float> o(nout);
    C().attention_forward(d, x->host.data(), ldq, x->host.data() + koff, ldkv, x->host.data() + voff, ldkv,
                          lengths->host.data(), ph.data(), o.data(), ldo);
  }
  auto probs = on_gpu(std::move(ph)), out = gpu_zeros(backward ? 1 : nout);
  auto dout = on_gpu(randf(backward ? nout : 1, 50)), dx = gpu_zeros(backward ? size : 1);
  Case r{kAttnOpNames[int(which)], s.label};
  // Napkin over the visible (query, key) pairs and the live keys: masked keys are never read.
  double pairs = 0, live = 0;
  for (int b = 0; b < d.batch; ++b) {
    const int kl = std::min(int(lengths->host[size_t(b)]), d.k_len);
    live += kl;
    for (int i = 0; i < d.q_len; ++i) pairs += d.causal ? std::max(0, std::min(kl, i + d.k_len - d.q_len + 1)) : kl;
  }
  const double rows_w = double(d.batch) * d.q_len * w;  // q, out, dout, dq: the heads' columns only
  const double kv_live = live * w, kv_all = double(d.batch) * d.k_len * w;
  // backward: q, dout, probs, live k and v in; dq, dk, dv out (its dS round trip through scratch not counted).
  r.bytes = backward ? kF * (3 * rows_w + double(nprobs) + 2 * kv_live + 2 * kv_all) + 4.0 * d.batch
                     : kF * (2 * rows_w + double(nprobs)) + (bf16 ? 2.0 : kF) * 2 * kv_live + 4.0 * d.batch;
  // q.k and p.v (2 head_dim each) and the softmax; backward dP, dQ, dK, dV and dS.
  r.flops = pairs * d.heads * (backward ? 8.0 * d.head_dim + 4 : 4.0 * d.head_dim + 5 + kExp);
  auto call = [=](const OpTable& t, const float* px, const uint16_t* px16, const int32_t* len, float* pprobs,
                  float* pout, const float* pdout, float* pdx) {
    if (which == Attn::forward)
      t.attention_forward(d, px, ldq, px + koff, ldkv, px + voff, ldkv, len, pprobs, pout, ldo);
    else if (bf16)
      t.attention_forward_bf16_kv(d, px, ldq, px16 + koff, ldkv, px16 + voff, ldkv, len, pprobs, pout, ldo);
    else
      t.attention_backward(d, px, ldq, px + koff, ldkv, px + voff, ldkv, pprobs, pdout, ldo, pdx, pdx + koff,
                           pdx + voff);
  };
  r.run = [=] { call(G(), x->d(), x16->d(), lengths->d(), probs->d(), out->d(), dout->d(), dx->d()); };
  r.check = [=] {
    r.run();
    std::vector<float> wprobs = probs->host, wout(out->host.size(), 0.0f), wdx(dx->host.size(), 0.0f);
    call(C(), x->host.data(), x16->host.data(), lengths->host.data(), wprobs.data(), wout.data(), dout->host.data(),
         wdx.data());
    if (backward) return count_wrong("attention_backward dq, dk, dv", dx->download(), wdx, 1e-4, 1e-4);
    const std::string op = kAttnOpNames[int(which)];
    return count_wrong((op + " probs").c_str(), probs->download(), wprobs, 1e-5, 1e-6) +
           count_wrong((op + " out").c_str(), out->download(), wout, 1e-5, 1e-5);
  };
  return r;
}

// ---- GNMT: the LSTM cell (one time step; its GEMMs are the caller's) ----
Case lstm_case(bool backward, int n, int hidden, int t, int max_len, const char* label) {
  const size_t nh = size_t(n) * hidden;
  auto gates = on_gpu(randf(4 * nh, 51, -3.0f, 3.0f)), c_prev = on_gpu(randf(nh, 52, -2.0f, 2.0f));
  auto h_prev = on_gpu(randf(nh, 53)), dh = on_gpu(randf(nh, 54)), dc = on_gpu(randf(nh, 55));
  // Rows whose sentence ended (lengths[r] <= t) keep their state.
  auto lengths = on_gpu(padded_lengths(n, max_len / 4, max_len, 56));
  // The CPU forward's acts and c: the backward's inputs on both devices (forward: its outputs).
  std::vector<float> ah(4 * nh, 0.0f), ch(nh, 0.0f);
  if (backward) {
    std::vector<float> hh(nh);
    C().lstm_cell_forward(gates->host.data(), c_prev->host.data(), h_prev->host.data(), hidden, n, hidden,
                          lengths->host.data(), t, ah.data(), ch.data(), hh.data(), hidden);
  }
  auto acts = on_gpu(std::move(ah)), c = on_gpu(std::move(ch)), h = gpu_zeros(nh);
  auto dgates = gpu_zeros(4 * nh), dc_prev = gpu_zeros(nh), dh_prev = gpu_zeros(nh);
  Case r{backward ? "lstm_cell_backward" : "lstm_cell_forward",
         std::to_string(n) + "x" + std::to_string(hidden) + " step " + std::to_string(t) + " " + label};
  // forward: gates, c_prev, h_prev in, acts, c, h out; backward: acts, c_prev, c, dh, dc in, dgates,
  // dc_prev, dh_prev out. Three sigmoids and two tanh forward; backward recomputes tanh(c).
  r.bytes = kF * (backward ? 14 : 12) * double(nh) + 4.0 * n;
  r.flops = (backward ? kExp + 16 : 5 * kExp + 4) * double(nh);
  r.run = [=] {
    if (backward)
      G().lstm_cell_backward(acts->d(), c_prev->d(), c->d(), dh->d(), hidden, dc->d(), n, hidden, lengths->d(), t,
                             dgates->d(), dc_prev->d(), dh_prev->d());
    else
      G().lstm_cell_forward(gates->d(), c_prev->d(), h_prev->d(), hidden, n, hidden, lengths->d(), t, acts->d(),
                            c->d(), h->d(), hidden);
  };
  r.check = [=] {
    r.run();
    if (!backward) {
      std::vector<float> wa(4 * nh), wc(nh), wh(nh);
      C().lstm_cell_forward(gates->host.data(), c_prev->host.data(), h_prev->host.data(), hidden, n, hidden,
                            lengths->host.data(), t, wa.data(), wc.data(), wh.data(), hidden);
      return count_wrong("lstm_cell_forward acts", acts->download(), wa, 1e-5, 1e-6) +
             count_wrong("lstm_cell_forward c", c->download(), wc, 1e-5, 1e-6) +
             count_wrong("lstm_cell_forward h", h->download(), wh, 1e-5, 1e-6);
    }
    std::vector<float> wdg(4 * nh), wdc(nh), wdh(nh);
    C().lstm_cell_backward(acts->host.data(), c_prev->host.data(), c->host.data(), dh->host.data(), hidden,
                           dc->host.data(), n, hidden, lengths->host.data(), t, wdg.data(), wdc.data(), wdh.data());
    return count_wrong_scaled("lstm_cell_backward dgates", dgates->download(), wdg, 1e-5, 1e-6) +
           count_wrong_scaled("lstm_cell_backward dc_prev", dc_prev->download(), wdc, 1e-5, 1e-6) +
           count_wrong("lstm_cell_backward dh_prev (copies and zeros)", dh_prev->download(), wdh, 0.0, 0.0);
  };
  return r;
}

// ---- GNMT: normalized Bahdanau attention over all decoder steps at once ----
Case additive_attention_case(bool backward, int batch, int q_len, int k_len, int units, const char* label) {
  AdditiveAttentionDims d;
  d.batch = batch, d.q_len = q_len, d.k_len = k_len, d.units = units, d.value_dim = units;  // values: encoder h
  const int V = units;
  const size_t rows = size_t(batch) * q_len, krows = size_t(batch) * k_len;
  auto qp = on_gpu(randf(rows * units, 57, -1.5f, 1.5f)), kp = on_gpu(randf(krows * units, 58, -1.5f, 1.5f));
  auto bias = on_gpu(randf(units, 59, -0.5f, 0.5f)), v = on_gpu(randf(units, 60));
  auto g = on_gpu(std::vector<float>{1.0f / std::sqrt(float(units))});  // the reference's initial g
  auto values = on_gpu(randf(krows * V, 61)), dcontext = on_gpu(randf(backward ? rows * V : 1, 62));
  auto lengths = on_gpu(padded_lengths(batch, k_len / 2, k_len, 63));
  // The CPU forward's probabilities: the backward's input on both devices.
  std::vector<float> ph(rows * k_len, 0.0f);
  if (backward) {
    std::vector<float> ctx(rows * V);
    C().additive_attention_forward(d, qp->host.data(), kp->host.data(), bias->host.data(), v->host.data(),
                                   g->host.data(), values->host.data(), lengths->host.data(), ph.data(), ctx.data(), V);
  }
  auto probs = on_gpu(std::move(ph)), context = gpu_zeros(backward ? 1 : rows * V);
  auto dqp = gpu_zeros(backward ? qp->host.size() : 1), dkp = gpu_zeros(backward ? kp->host.size() : 1);
  auto dvalues = gpu_zeros(backward ? values->host.size() : 1);
  auto dbias = gpu_zeros(units), dv = gpu_zeros(units), dg = gpu_zeros(1);  // accumulated onto
  char shape[96];
  std::snprintf(shape, sizeof shape, "B%d q%d k%d units %d %s", batch, q_len, k_len, units, label);
  Case r{backward ? "additive_attention_backward" : "additive_attention_forward", shape};
  double live = 0;  // keys below their row's length: masked keys are never read
  for (int32_t l : lengths->host) live += std::min(int(l), k_len);
  const double pairs = live * q_len, U = units, Q = double(rows), P = double(rows) * k_len;
  // forward: qp, live kp and values, bias, v, g in; probs and context out. backward: those and probs,
  // dcontext in; dqp, dkp, dvalues out; dbias, dv, dg read and written.
  r.bytes = backward ? kF * (2 * Q * U + (live + double(krows)) * (U + V) + P + Q * V + 6 * U + 3) + 4.0 * batch
                     : kF * (Q * U + live * (U + V) + 2 * U + 1 + P + Q * V) + 4.0 * batch;
  // Per pair and unit: two adds, a tanh and a multiply-add (backward: the tanh again, its derivative,
  // the sums into dqp, dkp and d(vn)); per pair and value column a multiply-add (backward two).
  r.flops = backward ? pairs * ((10 + kExp) * U + 4.0 * V + 5) : pairs * ((4 + kExp) * U + 2.0 * V + 5 + kExp);
  r.run = [=] {
    if (backward)
      G().additive_attention_backward(d, qp->d(), kp->d(), bias->d(), v->d(), g->d(), values->d(), lengths->d(),
                                      probs->d(), dcontext->d(), V, dqp->d(), dkp->d(), dvalues->d(), dbias->d(),
                                      dv->d(), dg->d());
    else
      G().additive_attention_forward(d, qp->d(), kp->d(), bias->d(), v->d(), g->d(), values->d(), lengths->d(),
                                     probs->d(), context->d(), V);
  };
  r.check = [=] {
    dbias->reset(), dv->reset(), dg->reset();
    r.run();
    if (!backward) {
      std::vector<float> wp(probs->host.size()), wc(context->host.size());
      C().additive_attention_forward(d, qp->host.data(), kp->host.data(), bias->host.data(), v->host.data(),
                                     g->host.data(), values->host.data(), lengths->host.data(), wp.data(), wc.data(),
                                     V);
      return count_wrong_scaled("additive_attention_forward probs", probs->download(), wp, 1e-4, 1e-5) +
             count_wrong_scaled("additive_attention_forward context", context->download(), wc, 1e-4, 1e-5);
    }
    std::vector<float> wdq(dqp->host.size()), wdk(dkp->host.size()), wdval(dvalues->host.size());
    std::vector<float> wdb = dbias->host, wdv = dv->host, wdg = dg->host;
    C().additive_attention_backward(d, qp->host.data(), kp->host.data(), bias->host.data(), v->host.data(),
                                    g->host.data(), values->host.data(), lengths->host.data(), probs->host.data(),
                                    dcontext->host.data(), V, wdq.data(), wdk.data(), wdval.data(), wdb.data(),
                                    wdv.data(), wdg.data());
    return count_wrong_scaled("additive_attention_backward dqp", dqp->download(), wdq, 1e-3, 1e-4) +
           count_wrong_scaled("additive_attention_backward dkp", dkp->download(), wdk, 1e-3, 1e-4) +
           count_wrong_scaled("additive_attention_backward dvalues", dvalues->download(), wdval, 1e-3, 1e-4) +
           count_wrong_scaled("additive_attention_backward dbias", dbias->download(), wdb, 1e-3, 1e-4) +
           count_wrong_scaled("additive_attention_backward dv", dv->download(), wdv, 1e-3, 1e-4) +
           wrong_scalar("additive_attention_backward dg", dg->download()[0], wdg[0], 1e-3, 1e-5);
  };
  return r;
}

// ================= Detection (ssd, maskrcnn) =================

// Boxes [count, 4] (x1, y1, x2, y2) inside a side x side image, each side drawn in [lo, hi].
std::vector<float> random_boxes(int count, float side, float lo, float hi, uint64_t stream) {
  const std::vector<float> u = randf(size_t(count) * 4, stream, 0.0f, 1.0f);
  std::vector<float> b(size_t(count) * 4);
  for (size_t i = 0; i < size_t(count); ++i) {
    const float w = lo + (hi - lo) * u[i * 4 + 2], h = lo + (hi - lo) * u[i * 4 + 3];
    b[i * 4 + 0] = (side - w) * u[i * 4 + 0], b[i * 4 + 1] = (side - h) * u[i * 4 + 1];
    b[i * 4 + 2] = b[i * 4 + 0] + w, b[i * 4 + 3] = b[i * 4 + 1] + h;
  }
  return b;
}

// RoIs [count, 5] (image in [0, n), box) in input pixels: random_boxes on `stream`, the images on
// stream + 1.
std::vector<float> random_rois(int count, int n, float side, float lo, float hi, uint64_t stream) {
  const std::vector<float> boxes = random_boxes(count, side, lo, hi, stream);
  const std::vector<int32_t> image = randi(count, stream + 1, n);
  std::vector<float> rois;
  for (int i = 0; i < count; ++i) {
    rois.push_back(float(image[size_t(i)]));
    rois.insert(rois.end(), boxes.begin() + i * 4, boxes.begin() + i * 4 + 4);
  }
  return rois;
}

// ---- Mask R-CNN: RoIAlign (sampling ratio 2, aligned false: MLPerf v0.7's) ----
Case roi_align_case(bool backward, int n, int hw, int c, int stride, int count, int pooled, float lo, float hi,
                    const char* label) {
  constexpr int kSampling = 2;
  const size_t nx = size_t(n) * hw * hw * c, ny = size_t(count) * pooled * pooled * c;
  auto x = on_gpu(randf(backward ? 1 : nx, 70)), dy = on_gpu(randf(backward ? ny : 1, 71));
  auto out = on_gpu(backward ? randf(nx, 72) : std::vector<float>(ny, 0.0f));  // backward: dx, accumulated onto
  auto rois = on_gpu(random_rois(count, n, float(hw * stride), lo, hi, 73));
  const float scale = 1.0f / float(stride);
  char shape[112];
  std::snprintf(shape, sizeof shape, "%d RoIs %dx%d of n%d %dx%dx%d %s", count, pooled, pooled, n, hw, hw, c, label);
  Case r{backward ? "roi_align_backward" : "roi_align_forward", shape};
  // forward: x, the RoIs in, y out; backward: dy, the RoIs in, dx read and written. Per output value
  // 2x2 samples of 4 weighted corners each, and the average.
  r.bytes = kF * (double(ny) + 5.0 * count + (backward ? 2.0 : 1.0) * double(nx));
  r.flops = double(ny) * (kSampling * kSampling * 8 + 1);
  r.run = [=] {
    if (backward)
      G().roi_align_backward(dy->d(), n, hw, hw, c, rois->d(), count, pooled, pooled, scale, kSampling, false,
                             out->d());
    else
      G().roi_align_forward(x->d(), n, hw, hw, c, rois->d(), count, pooled, pooled, scale, kSampling, false, out->d());
  };
  r.check = [=] {
    out->reset();
    r.run();
    std::vector<float> want = out->host;
    if (backward) {
      C().roi_align_backward(dy->host.data(), n, hw, hw, c, rois->host.data(), count, pooled, pooled, scale, kSampling,
                             false, want.data());
      return count_wrong_scaled("roi_align_backward dx (atomic adds)", out->download(), want, 1e-4, 1e-5);
    }
    C().roi_align_forward(x->host.data(), n, hw, hw, c, rois->host.data(), count, pooled, pooled, scale, kSampling,
                          false, want.data());
    return count_wrong_scaled("roi_align_forward y", out->download(), want, 1e-5, 1e-6);
  };
  return r;
}

// ---- Mask R-CNN: the FPN's nearest 2x upsampling (backward accumulates) ----
Case upsample_case(bool backward, int n, int h, int w, int c, const char* label) {
  const size_t nx = size_t(n) * h * w * c;
  auto in = on_gpu(randf(backward ? 4 * nx : nx, 75));                             // x, or dy
  auto out = on_gpu(backward ? randf(nx, 76) : std::vector<float>(4 * nx, 0.0f));  // y, or dx (accumulated onto)
  char shape[96];
  std::snprintf(shape, sizeof shape, "%dx%dx%d->%dx%d n%d %s", h, w, c, 2 * h, 2 * w, n, label);
  Case r{backward ? "upsample_nearest2x_backward" : "upsample_nearest2x_forward", shape};
  r.bytes = kF * double(nx) * (backward ? 6 : 5);  // backward: dy in, dx read and written
  r.flops = backward ? 4.0 * double(nx) : 0.0;
  auto call = [=](const OpTable& t, const float* pin, float* pout) {
    if (backward) t.upsample_nearest2x_backward(pin, n, h, w, c, pout);
    else t.upsample_nearest2x_forward(pin, n, h, w, c, pout);
  };
  r.run = [=] { call(G(), in->d(), out->d()); };
  r.check = [=] {
    out->reset();
    r.run();
    std::vector<float> want = out->host;
    call(C(), in->host.data(), want.data());
    return count_wrong(r.op.c_str(), out->download(), want, 0.0, 0.0);
  };
  return r;
}

// ---- Mask R-CNN: greedy NMS of score-sorted boxes (the RPN's proposals) ----
Case nms_case(int n, int max_keep, float iou, float image, const char* label) {
  // Every 9th box a copy of the one before: suppressed whatever the rest overlaps.
  std::vector<float> bh = random_boxes(n, image, 0.02f * image, 0.3f * image, 77);
  for (size_t i = 9; i < size_t(n); i += 9) std::copy_n(bh.begin() + (i - 1) * 4, 4, bh.begin() + i * 4);
  auto boxes = on_gpu(std::move(bh));
  auto keep = on_gpu(std::vector<int32_t>(size_t(max_keep), -1));
  auto arena = gpu_arena(G().nms_scratch_floats(n));
  Arena ca = cpu_arena(C().nms_scratch_floats(n));
  std::vector<int32_t> want(size_t(max_keep), -1);
  const int kept = C().nms_sorted(boxes->host.data(), n, iou, max_keep, want.data(), ca);
  char shape[96];
  std::snprintf(shape, sizeof shape, "%d boxes, %d kept, iou %.1f %s", n, kept, double(iou), label);
  Case r{"nms_sorted", shape};
  // The boxes in, the kept indices out; every pair's IoU once (the suppression mask's round trip through
  // scratch not counted). It waits for the count.
  r.bytes = kF * 4.0 * n + 4.0 * kept;
  r.flops = 15.0 * double(n) * double(n - 1) / 2;
  r.run = [=] { G().nms_sorted(boxes->d(), n, iou, max_keep, keep->d(), *arena); };
  r.check = [=] {
    keep->reset();
    const int got = G().nms_sorted(boxes->d(), n, iou, max_keep, keep->d(), *arena);
    return size_t(got != kept) + count_unequal("nms_sorted keep", keep->download(), want);
  };
  return r;
}

// ---- Mask R-CNN: the RPN's proposals (per level top-k, decode, NMS; the best over the levels) ----
Case rpn_proposals_case(int n, const std::vector<int>& level_anchors, int pre, int post, float image,
                        const char* label) {
  std::vector<int32_t> first{0};
  for (int a : level_anchors) first.push_back(first.back() + a);
  const int A = first.back(), L = static_cast<int>(level_anchors.size());
  auto anchors = on_gpu(random_boxes(A, image, 0.02f * image, 0.4f * image, 78));
  auto obj = on_gpu(randf(size_t(n) * A, 79, -6.0f, 6.0f));
  auto del = on_gpu(randf(size_t(n) * A * 4, 80, -0.4f, 0.4f));
  auto boxes = on_gpu(std::vector<float>(size_t(n) * post * 4, 0.0f));
  auto scores = on_gpu(std::vector<float>(size_t(n) * post, 0.0f));
  auto count = on_gpu(std::vector<int32_t>(size_t(n), -1));
  auto arena = gpu_arena(G().rpn_proposals_scratch_floats(n, A, L, pre, post));
  const int side = static_cast<int>(image);
  char shape[112];
  std::snprintf(shape, sizeof shape, "n%d, %d anchors in %d levels, top %d -> %d %s", n, A, L, pre, post, label);
  Case r{"rpn_proposals", shape};
  // The objectness read by the selection's passes (four radix passes and the emit), the chosen
  // anchors' deltas and boxes, the proposals out; each level's greedy NMS: every pair's IoU once.
  const double chosen = double(n) * L * pre;
  r.bytes = kF * (5.0 * n * A + 8.0 * chosen + 5.0 * n * post);
  r.flops = chosen * 30.0 + 15.0 * double(n) * L * double(pre) * double(pre - 1) / 2;
  r.run = [=] {
    G().rpn_proposals(obj->d(), del->d(), anchors->d(), n, A, first.data(), L, side, side, pre, post, 0.7f, 0.0f,
                      boxes->d(), scores->d(), count->d(), *arena);
  };
  r.check = [=] {
    boxes->reset();
    scores->reset();
    count->reset();
    r.run();
    std::vector<float> wb(boxes->host.size()), ws(scores->host.size());
    std::vector<int32_t> wc(static_cast<size_t>(n));
    Arena ca = cpu_arena(C().rpn_proposals_scratch_floats(n, A, L, pre, post));
    C().rpn_proposals(obj->host.data(), del->host.data(), anchors->host.data(), n, A, first.data(), L, side, side, pre,
                      post, 0.7f, 0.0f, wb.data(), ws.data(), wc.data(), ca);
    return count_unequal("rpn_proposals count", count->download(), wc) +
           count_unequal("rpn_proposals scores", scores->download(), ws) +
           count_wrong("rpn_proposals boxes", boxes->download(), wb, 1e-6, 1e-5);
  };
  return r;
}

// ---- Mask R-CNN: the heads' RoI sampling and the mask rows' targets ----
// Image i: `gts` instances (boxes of side 0.1 .. 0.4 of the image, 0/1 masks filling them) and
// `proposals` proposals, a third of them jittered instance boxes (foreground), the rest random.
struct RoiBatch {
  std::vector<float> proposals, gt_boxes;
  std::vector<int32_t> counts, gt_labels, gt_first{0};
  std::vector<uint8_t> masks;
};
RoiBatch roi_batch(int n, int proposals, int gts, int side) {
  RoiBatch b;
  const float S = float(side);
  for (int i = 0; i < n; ++i) {
    const std::vector<float> g = random_boxes(gts, S, 0.1f * S, 0.4f * S, 120 + uint64_t(i));
    b.gt_boxes.insert(b.gt_boxes.end(), g.begin(), g.end());
    for (int k = 0; k < gts; ++k) {
      b.gt_labels.push_back(1 + k % 80);
      const size_t at = b.masks.size();
      b.masks.resize(at + size_t(side) * side, 0);
      for (int y = int(g[size_t(k) * 4 + 1]); y < int(g[size_t(k) * 4 + 3]); ++y)
        for (int x = int(g[size_t(k) * 4]); x < int(g[size_t(k) * 4 + 2]); ++x) b.masks[at + size_t(y) * side + x] = 1;
    }
    b.gt_first.push_back(b.gt_first.back() + gts);
    const std::vector<float> r = random_boxes(proposals, S, 0.02f * S, 0.5f * S, 130 + uint64_t(i));
    const std::vector<float> jitter = randf(size_t(proposals) * 4, 140 + uint64_t(i), -0.03f * S, 0.03f * S);
    for (int j = 0; j < proposals; ++j) {
      float box[4];
      for (int c = 0; c < 4; ++c)
        box[c] = j % 3 == 0 ? std::clamp(g[size_t(j % gts) * 4 + c] + jitter[size_t(j) * 4 + c], 0.0f, S)
                            : r[size_t(j) * 4 + c];
      if (box[2] <= box[0] + 1.0f || box[3] <= box[1] + 1.0f) std::copy(&r[size_t(j) * 4], &r[size_t(j) * 4] + 4, box);
      b.proposals.insert(b.proposals.end(), box, box + 4);
    }
    b.counts.push_back(proposals);
  }
  return b;
}

// Sampling (mask_rows 0) or, after it, the mask rows' targets (mask_rows per image).
Case roi_sample_case(int n, int proposals, int gts, int batch, int side, int mask_rows, const char* label) {
  const RoiBatch b = roi_batch(n, proposals, gts, side);
  const RoiSampling spec{batch, 0.25f, 0.5f, 0.5f, 0.0f, 7, 11, 1000};
  const int R = n * batch, F = n * mask_rows, M = 28;
  auto prop = on_gpu(std::vector<float>(b.proposals));
  auto gtb = on_gpu(std::vector<float>(b.gt_boxes));
  auto cnt = on_gpu(std::vector<int32_t>(b.counts));
  auto gtl = on_gpu(std::vector<int32_t>(b.gt_labels));
  auto gtf = on_gpu(std::vector<int32_t>(b.gt_first));
  auto masks = on_gpu(std::vector<uint8_t>(b.masks));
  auto rois = on_gpu(std::vector<float>(size_t(R) * 5, 0.0f)), deltas = on_gpu(std::vector<float>(size_t(R) * 4, 0.0f));
  auto rf = on_gpu(std::vector<int32_t>(size_t(n) + 1, 0)), ff = on_gpu(std::vector<int32_t>(size_t(n) + 1, 0));
  auto lab = on_gpu(std::vector<int32_t>(size_t(R), 0)), mat = on_gpu(std::vector<int32_t>(size_t(R), 0));
  auto mrois = on_gpu(std::vector<float>(size_t(F) * 5, 0.0f));
  auto mfirst = on_gpu(std::vector<int32_t>(size_t(n) + 1, 0)), mlab = on_gpu(std::vector<int32_t>(size_t(F), 0));
  auto targets = on_gpu(std::vector<uint8_t>(size_t(F) * M * M, 0));
  auto arena = gpu_arena(G().rcnn_sample_rois_scratch_floats(n, proposals, gts));
  const bool masks_case = mask_rows > 0;
  char shape[112];
  if (masks_case)
    std::snprintf(shape, sizeof shape, "n%d x %d rows, %dx%d masks of %dx%d %s", n, mask_rows, M, M, side, side, label);
  else
    std::snprintf(shape, sizeof shape, "n%d, %d proposals + %d gts -> %d %s", n, proposals, gts, batch, label);
  Case r{masks_case ? "rcnn_mask_targets" : "rcnn_sample_rois", shape};
  const auto sample = [=] {
    G().rcnn_sample_rois(spec, prop->d(), cnt->d(), proposals, gtb->d(), gtl->d(), gtf->d(), n, gts, R, rois->d(),
                         rf->d(), ff->d(), lab->d(), mat->d(), deltas->d(), *arena);
  };
  const auto targets_of = [=] {
    G().rcnn_mask_targets(rois->d(), rf->d(), ff->d(), lab->d(), mat->d(), n, mask_rows, masks->d(), gtf->d(), side,
                          side, M, F, mrois->d(), mfirst->d(), mlab->d(), targets->d());
  };
  if (masks_case) {
    // The rows' RoIs and labels read, each target pixel's samples (about 2x2 per bin at these
    // sizes) gathered from the instance's bytes, the bytes written.
    r.bytes = double(F) * M * M * (1.0 + 16.0) + kF * 7.0 * F;
    r.flops = double(F) * M * M * 4 * 12;
    r.run = [=] { targets_of(); };
  } else {
    // Every candidate's IoU with its image's instances; the rows written.
    const double cand = double(n) * (proposals + gts);
    r.bytes = kF * (4.0 * cand + 3.0 * cand + 10.0 * R);
    r.flops = cand * gts * 12.0;
    r.run = [=] { sample(); };
  }
  r.check = [=] {
    sample();
    targets_of();
    const int N1 = n + 1;
    const size_t n1 = static_cast<size_t>(N1), rows = static_cast<size_t>(R), mrows = static_cast<size_t>(F);
    std::vector<float> wr(rows * 5), wd(rows * 4), wmr(mrows * 5);
    std::vector<int32_t> wrf(n1), wff(n1), wl(rows), wm(rows), wmf(n1), wml(mrows);
    std::vector<uint8_t> wt(mrows * M * M);
    Arena ca = cpu_arena(C().rcnn_sample_rois_scratch_floats(n, proposals, gts));
    C().rcnn_sample_rois(spec, b.proposals.data(), b.counts.data(), proposals, b.gt_boxes.data(), b.gt_labels.data(),
                         b.gt_first.data(), n, gts, R, wr.data(), wrf.data(), wff.data(), wl.data(), wm.data(),
                         wd.data(), ca);
    size_t wrong = count_unequal("rcnn_sample_rois row_first", rf->download(), wrf) +
                   count_unequal("rcnn_sample_rois fg_first", ff->download(), wff) +
                   count_unequal("rcnn_sample_rois labels", lab->download(), wl) +
                   count_unequal("rcnn_sample_rois rois", rois->download(), wr) +
                   count_wrong("rcnn_sample_rois deltas", deltas->download(), wd, 1e-6, 1e-6);
    if (masks_case) {
      C().rcnn_mask_targets(wr.data(), wrf.data(), wff.data(), wl.data(), wm.data(), n, mask_rows, b.masks.data(),
                            b.gt_first.data(), side, side, M, F, wmr.data(), wmf.data(), wml.data(), wt.data());
      wrong += count_unequal("rcnn_mask_targets mask_first", mfirst->download(), wmf) +
               count_unequal("rcnn_mask_targets targets", targets->download(), wt);
    }
    return wrong;
  };
  return r;
}

// ---- Mask R-CNN: RoIAlign over the FPN's levels (each RoI's level chosen by the op) ----
Case roi_align_levels_case(bool backward, int n, int side, int c, int count, int pooled, const char* label) {
  constexpr int kSampling = 2, kLevels = 4;
  RoiLevels L;
  L.levels = kLevels;
  std::vector<std::shared_ptr<DevF>> maps;
  double nx = 0.0;  // the levels' values, all of them
  for (int l = 0; l < kLevels; ++l) {
    const int stride = 4 << l, hw = side / stride;
    L.h[l] = L.w[l] = hw;
    L.spatial_scale[l] = 1.0f / float(stride);
    maps.push_back(on_gpu(randf(size_t(n) * hw * hw * c, 150 + uint64_t(l))));
    nx += double(n) * hw * hw * c;
  }
  const size_t ny = size_t(count) * pooled * pooled * c;
  auto dy = on_gpu(randf(ny, 155)), out = on_gpu(std::vector<float>(ny, 0.0f));
  auto rois = on_gpu(random_rois(count, n, float(side), 16.0f, 0.7f * float(side), 156));
  RoiLevels gl = L;
  for (int l = 0; l < kLevels; ++l) gl.x[l] = gl.dx[l] = maps[size_t(l)]->d();
  char shape[112];
  std::snprintf(shape, sizeof shape, "%d RoIs %dx%d of n%d P2..P5 of %dx%dx%d %s", count, pooled, pooled, n, side, side,
                c, label);
  Case r{backward ? "roi_align_levels_backward" : "roi_align_levels_forward", shape};
  // As roi_align_case: the outputs (or their gradients), the RoIs, and the maps read once (backward:
  // read and written).
  r.bytes = kF * (double(ny) + 5.0 * count + (backward ? 2.0 : 1.0) * nx);
  r.flops = double(ny) * (kSampling * kSampling * 8 + 1);
  r.run = [=] {
    if (backward)
      G().roi_align_levels_backward(gl, n, c, rois->d(), count, pooled, kSampling, dy->d());
    else
      G().roi_align_levels_forward(gl, n, c, rois->d(), count, pooled, kSampling, out->d());
  };
  r.check = [=] {
    RoiLevels cl = L;
    std::vector<std::vector<float>> want;
    for (int l = 0; l < kLevels; ++l) {
      maps[size_t(l)]->reset();
      want.push_back(maps[size_t(l)]->host);
    }
    for (int l = 0; l < kLevels; ++l) cl.x[l] = cl.dx[l] = want[size_t(l)].data();
    out->reset();
    r.run();
    if (backward) {
      C().roi_align_levels_backward(cl, n, c, rois->host.data(), count, pooled, kSampling, dy->host.data());
      size_t wrong = 0;
      for (int l = 0; l < kLevels; ++l)
        wrong += count_wrong_scaled("roi_align_levels_backward dx (atomic adds)", maps[size_t(l)]->download(),
                                    want[size_t(l)], 1e-4, 1e-5);
      return wrong;
    }
    std::vector<float> wy(ny);
    C().roi_align_levels_forward(cl, n, c, rois->host.data(), count, pooled, kSampling, wy.data());
    return count_wrong_scaled("roi_align_levels_forward y", out->download(), wy, 1e-5, 1e-6);
  };
  return r;
}

// ---- Mask R-CNN: the RPN's loss over the sampled anchors ----
Case rpn_loss_case(int n, int A, int per_image, const char* label) {
  std::vector<int32_t> index, sample_first{0}, positive_first{0};
  const int stride = std::max(1, A / per_image);
  for (int i = 0; i < n; ++i) {
    for (int s = 0; s < per_image; ++s) index.push_back((s * stride + i) % A);
    sample_first.push_back(static_cast<int32_t>(index.size()));
    positive_first.push_back(positive_first.back() + per_image / 2);
  }
  auto obj = on_gpu(randf(size_t(n) * A, 81, -4.0f, 4.0f));
  auto del = on_gpu(randf(size_t(n) * A * 4, 82));
  auto targets = on_gpu(randf(size_t(positive_first.back()) * 4, 83));
  auto idx = on_gpu(std::vector<int32_t>(index)), sf = on_gpu(std::vector<int32_t>(sample_first)),
       pf = on_gpu(std::vector<int32_t>(positive_first));
  auto dobj = on_gpu(std::vector<float>(size_t(n) * A, 0.0f)), ddel = on_gpu(std::vector<float>(size_t(n) * A * 4, 0.0f));
  auto arena = gpu_arena(G().rpn_loss_scratch_floats(n));
  auto parts = gpu_loss_sum(2);
  char shape[96];
  std::snprintf(shape, sizeof shape, "n%d, %d anchors, %d samples each %s", n, A, per_image, label);
  Case r{"rpn_loss_batch", shape};
  // Both gradients zeroed whole (n A x 5 floats written), the samples' values read and gradients
  // written; it adds the loss's two parts to device doubles.
  r.bytes = kF * (5.0 * n * A + 12.0 * n * per_image);
  r.flops = 40.0 * n * per_image;
  r.run = [=] {
    G().rpn_loss_batch(obj->d(), del->d(), n, A, idx->d(), sf->d(), pf->d(), targets->d(), 0.5f, dobj->d(), ddel->d(),
                       parts->d(), *arena);
  };
  r.check = [=] {
    parts->zero();
    G().rpn_loss_batch(obj->d(), del->d(), n, A, idx->d(), sf->d(), pf->d(), targets->d(), 0.5f, dobj->d(), ddel->d(),
                       parts->d(), *arena);
    const std::vector<double> gp = parts->download();
    const double got = gp[0] + gp[1];
    std::vector<float> wo(dobj->host.size()), wd(ddel->host.size());
    Arena ca = cpu_arena(C().rpn_loss_scratch_floats(n));
    double cp[2] = {0.0, 0.0};
    C().rpn_loss_batch(obj->host.data(), del->host.data(), n, A, index.data(), sample_first.data(),
                       positive_first.data(), targets->host.data(), 0.5f, wo.data(), wd.data(), cp, ca);
    const double want = cp[0] + cp[1];
    return size_t(std::fabs(got - want) > 1e-9 * std::fabs(want)) +
           count_wrong("rpn_loss_batch dobjectness", dobj->download(), wo, 1e-6, 1e-9) +
           count_wrong("rpn_loss_batch ddeltas", ddel->download(), wd, 1e-6, 1e-9);
  };
  return r;
}

// ---- Mask R-CNN: the box head's loss over the sampled RoIs ----
Case box_loss_case(int n, int rows, int classes, const char* label) {
  std::vector<int32_t> labels, row_first{0}, fg_first{0};
  const std::vector<int32_t> u = randi(size_t(n) * rows, 84, classes - 1);
  for (int i = 0; i < n; ++i) {
    for (int r = 0; r < rows; ++r) labels.push_back(r < rows / 4 ? 1 + u[size_t(i) * rows + r] : 0);
    row_first.push_back(static_cast<int32_t>(labels.size()));
    fg_first.push_back(fg_first.back() + rows / 4);
  }
  const size_t R = size_t(n) * rows;
  auto logits = on_gpu(randf(R * classes, 85, -4.0f, 4.0f)), deltas = on_gpu(randf(R * classes * 4, 86));
  auto targets = on_gpu(randf(size_t(fg_first.back()) * 4, 87));
  auto lab = on_gpu(std::vector<int32_t>(labels)), rf = on_gpu(std::vector<int32_t>(row_first)),
       ff = on_gpu(std::vector<int32_t>(fg_first));
  auto dcls = on_gpu(std::vector<float>(R * classes, 0.0f)), dbox = on_gpu(std::vector<float>(R * classes * 4, 0.0f));
  auto arena = gpu_arena(G().rcnn_box_loss_scratch_floats(n));
  auto parts = gpu_loss_sum(2);
  char shape[96];
  std::snprintf(shape, sizeof shape, "n%d x %d RoIs, %d classes %s", n, rows, classes, label);
  Case r{"rcnn_box_loss", shape};
  // The logits read and their gradient written, the deltas' gradient zeroed and the foreground's
  // read; per logit an exp twice. It adds the loss's two parts to device doubles.
  r.bytes = kF * (2.0 * R * classes + 4.0 * R * classes + 2.0 * R);
  r.flops = 2.0 * 20.0 * double(R) * classes;
  r.run = [=] {
    G().rcnn_box_loss(logits->d(), deltas->d(), n, classes, lab->d(), rf->d(), ff->d(), targets->d(), 0.5f, dcls->d(),
                      dbox->d(), parts->d(), *arena);
  };
  r.check = [=] {
    parts->zero();
    G().rcnn_box_loss(logits->d(), deltas->d(), n, classes, lab->d(), rf->d(), ff->d(), targets->d(), 0.5f, dcls->d(),
                      dbox->d(), parts->d(), *arena);
    const std::vector<double> gp = parts->download();
    const double got = gp[0] + gp[1];
    std::vector<float> wc(dcls->host.size()), wb(dbox->host.size());
    Arena ca = cpu_arena(C().rcnn_box_loss_scratch_floats(n));
    double cp[2] = {0.0, 0.0};
    C().rcnn_box_loss(logits->host.data(), deltas->host.data(), n, classes, labels.data(), row_first.data(),
                      fg_first.data(), targets->host.data(), 0.5f, wc.data(), wb.data(), cp, ca);
    const double want = cp[0] + cp[1];
    return size_t(std::fabs(got - want) > 1e-9 * std::fabs(want)) +
           count_wrong("rcnn_box_loss dcls", dcls->download(), wc, 1e-6, 1e-9) +
           count_wrong("rcnn_box_loss dbox", dbox->download(), wb, 1e-6, 1e-9);
  };
  return r;
}

// ---- Mask R-CNN: the mask head's loss (each row's label channel) ----
Case mask_loss_case(int n, int rows_per_image, int mask, int classes, const char* label) {
  const int pixels = mask * mask, rows = n * rows_per_image;
  std::vector<int32_t> row_first{0};
  for (int i = 0; i < n; ++i) row_first.push_back(row_first.back() + rows_per_image);
  const std::vector<int32_t> labels = randi(size_t(rows), 88, classes);
  const std::vector<float> u = randf(size_t(rows) * pixels, 89, 0.0f, 1.0f);
  std::vector<uint8_t> th(u.size());
  for (size_t i = 0; i < u.size(); ++i) th[i] = u[i] < 0.3f ? 1 : 0;
  const size_t total = size_t(rows) * pixels * classes;
  auto logits = on_gpu(randf(total, 90, -6.0f, 6.0f)), dlogits = on_gpu(std::vector<float>(total, 0.0f));
  auto lab = on_gpu(std::vector<int32_t>(labels)), rf = on_gpu(std::vector<int32_t>(row_first));
  auto targets = on_gpu(std::vector<uint8_t>(th));
  auto arena = gpu_arena(G().rcnn_mask_loss_scratch_floats(n, rows, pixels));
  auto loss = gpu_loss_sum();
  char shape[96];
  std::snprintf(shape, sizeof shape, "n%d x %d rows of %dx%d, %d classes %s", n, rows_per_image, mask, mask, classes,
                label);
  Case r{"rcnn_mask_loss", shape};
  // The gradient zeroed whole, the picked logits read and their gradients written, the targets read.
  r.bytes = kF * (double(total) + 2.0 * rows * pixels) + double(rows) * pixels;
  r.flops = 12.0 * double(rows) * pixels;
  r.run = [=] {
    G().rcnn_mask_loss(logits->d(), n, rows, pixels, classes, lab->d(), targets->d(), rf->d(), 0.5f, dlogits->d(),
                       loss->d(), *arena);
  };
  r.check = [=] {
    loss->zero();
    G().rcnn_mask_loss(logits->d(), n, rows, pixels, classes, lab->d(), targets->d(), rf->d(), 0.5f, dlogits->d(),
                       loss->d(), *arena);
    const double got = loss->read();
    std::vector<float> want(total);
    Arena ca = cpu_arena(C().rcnn_mask_loss_scratch_floats(n, rows, pixels));
    double w = 0.0;
    C().rcnn_mask_loss(logits->host.data(), n, rows, pixels, classes, labels.data(), th.data(), row_first.data(), 0.5f,
                       want.data(), &w, ca);
    return size_t(std::fabs(got - w) > 1e-6 * std::fabs(w)) +
           count_wrong("rcnn_mask_loss dlogits", dlogits->download(), want, 1e-5, 1e-9);
  };
  return r;
}

// ---- SSD: priors, targets, loss, post-processing ----
// Priors [P, 4] (cx, cy, w, h), normalized.
std::vector<float> random_priors(int P, uint64_t stream) {
  std::vector<float> p = randf(size_t(P) * 4, stream, 0.0f, 1.0f);
  for (size_t i = 0; i < size_t(P); ++i) {
    p[i * 4 + 0] = 0.05f + 0.9f * p[i * 4 + 0], p[i * 4 + 1] = 0.05f + 0.9f * p[i * 4 + 1];
    p[i * 4 + 2] = 0.05f + 0.45f * p[i * 4 + 2], p[i * 4 + 3] = 0.05f + 0.45f * p[i * 4 + 3];
  }
  return p;
}

Case ssd_assign_case(int n, int P, int classes, int max_gts, const char* label) {
  auto priors = on_gpu(random_priors(P, 78));
  std::vector<int32_t> first{0};  // image i owns gts first[i]..first[i+1]: 1 to max_gts each
  for (int i = 0; i < n; ++i) first.push_back(first.back() + 1 + int32_t(rng_below(77, 79, uint64_t(i), max_gts)));
  const int ngt = first.back();
  auto gts = on_gpu(random_boxes(ngt, 1.0f, 0.02f, 0.5f, 80));
  std::vector<int32_t> lh = randi(ngt, 81, classes - 1);
  for (int32_t& l : lh) ++l;
  auto gt_labels = on_gpu(std::move(lh)), gt_first = on_gpu(first);
  const size_t NP = size_t(n) * P;
  auto labels = on_gpu(std::vector<int32_t>(NP, 0));
  auto loc = gpu_zeros(NP * 4);
  auto arena = gpu_arena(G().ssd_assign_scratch_floats(P, ngt));
  char shape[96];
  std::snprintf(shape, sizeof shape, "n%d P%d %d gts %s", n, P, ngt, label);
  Case r{"ssd_assign_targets", shape};
  // priors, gts in; labels and loc targets out. An IoU per (prior, gt of its image), twice (best gt
  // per prior, best prior per gt); the encoding's two logs per prior.
  r.bytes = kF * (4.0 * P + 4.0 * ngt) + 4.0 * (ngt + n + 1) + (4.0 + 4 * kF) * double(NP);
  r.flops = 2 * 15.0 * double(P) * ngt + (2 * kExp + 10) * double(NP);
  r.run = [=] {
    G().ssd_assign_targets(priors->d(), P, gts->d(), gt_labels->d(), gt_first->d(), n, 0.5f, 0.1f, 0.2f, labels->d(),
                           loc->d(), *arena);
  };
  r.check = [=] {
    r.run();
    std::vector<int32_t> wl(NP);
    std::vector<float> wloc(NP * 4);
    Arena ca = cpu_arena(C().ssd_assign_scratch_floats(P, ngt));
    C().ssd_assign_targets(priors->host.data(), P, gts->host.data(), gt_labels->host.data(), gt_first->host.data(), n,
                           0.5f, 0.1f, 0.2f, wl.data(), wloc.data(), ca);
    return count_unequal("ssd_assign_targets labels", labels->download(), wl) +
           count_wrong("ssd_assign_targets loc_targets", loc->download(), wloc, 1e-6, 1e-6);
  };
  return r;
}

Case ssd_loss_case(int n, int P, int classes, const char* label) {
  const size_t NP = size_t(n) * P, NPC = NP * classes;
  auto conf = on_gpu(randf(NPC, 82, -3.0f, 3.0f)), loc = on_gpu(randf(NP * 4, 83, -2.0f, 2.0f));
  auto targets = on_gpu(randf(NP * 4, 84, -2.0f, 2.0f));
  std::vector<int32_t> lh(NP);  // about 1 prior in 64 matched, to a class in 1..classes-1
  for (size_t e = 0; e < NP; ++e) {
    const int32_t draw = int32_t(rng_below(77, 85, e, uint64_t(64) * (classes - 1)));
    lh[e] = draw < classes - 1 ? 1 + draw : 0;
  }
  auto labels = on_gpu(std::move(lh));
  auto dconf = gpu_zeros(NPC), dloc = gpu_zeros(NP * 4);
  auto arena = gpu_arena(G().ssd_loss_scratch_floats(n, P));
  auto loss = gpu_loss_sum();
  const float scale = 1.0f / float(n);
  char shape[96];
  std::snprintf(shape, sizeof shape, "n%d P%d C%d %s", n, P, classes, label);
  Case r{"ssd_multibox_loss", shape};
  // conf, loc, loc targets, labels in; dconf, dloc out. Per logit the log-sum-exp and the softmax of
  // the gradient; per offset the smooth L1 and its gradient (the mining's sort not counted). It waits
  // for num_pos (host memory); the loss is added to a device double.
  r.bytes = kF * (2.0 * double(NPC) + 12.0 * double(NP)) + 4.0 * double(NP);
  r.flops = (2 * kExp + 6) * double(NPC) + 4 * 6.0 * double(NP);
  r.run = [=] {
    int pos = 0;
    G().ssd_multibox_loss(conf->d(), loc->d(), labels->d(), targets->d(), n, P, classes, 3.0f, scale, dconf->d(),
                          dloc->d(), loss->d(), &pos, *arena);
  };
  r.check = [=] {
    int gpos = -1, cpos = -2;
    loss->zero();
    G().ssd_multibox_loss(conf->d(), loc->d(), labels->d(), targets->d(), n, P, classes, 3.0f, scale, dconf->d(),
                          dloc->d(), loss->d(), &gpos, *arena);
    const double gl = loss->read();
    std::vector<float> wdc(NPC), wdl(NP * 4);
    Arena ca = cpu_arena(C().ssd_loss_scratch_floats(n, P));
    double cl = 0.0;
    C().ssd_multibox_loss(conf->host.data(), loc->host.data(), labels->host.data(), targets->host.data(), n, P,
                          classes, 3.0f, scale, wdc.data(), wdl.data(), &cl, &cpos, ca);
    return size_t(gpos != cpos) + wrong_scalar("ssd_multibox_loss loss", gl, cl, 1e-9, 0.0) +
           count_wrong_scaled("ssd_multibox_loss dconf", dconf->download(), wdc, 1e-6, 1e-7) +
           count_wrong_scaled("ssd_multibox_loss dloc", dloc->download(), wdl, 1e-6, 1e-7);
  };
  return r;
}

Case ssd_detect_case(int n, int P, int classes, int topk, int max_dets, const char* label) {
  const size_t NP = size_t(n) * P, D = size_t(n) * max_dets;
  auto conf = on_gpu(randf(NP * classes, 86, -4.0f, 4.0f)), loc = on_gpu(randf(NP * 4, 87, -1.0f, 1.0f));
  auto priors = on_gpu(random_priors(P, 88));
  auto boxes = gpu_zeros(D * 4), scores = gpu_zeros(D);
  auto det_classes = on_gpu(std::vector<int32_t>(D, 0)), count = on_gpu(std::vector<int32_t>(size_t(n), 0));
  auto arena = gpu_arena(G().ssd_detect_scratch_floats(n, P, classes, topk));
  char shape[96];
  std::snprintf(shape, sizeof shape, "n%d P%d C%d top %d, %d dets %s", n, P, classes, topk, max_dets, label);
  Case r{"ssd_detect", shape};
  // conf, loc, priors in; the detections out. Per logit a softmax; per prior the decoding (two exps).
  // The per-class NMS's IoUs depend on the scores and are not counted.
  r.bytes = kF * (double(NP) * classes + 4.0 * double(NP) + 4.0 * P) + (5 * kF + 4) * double(D) + 4.0 * n;
  r.flops = (kExp + 3) * double(NP) * classes + (2 * kExp + 12) * double(NP);
  auto call = [=](const OpTable& t, const float* pconf, const float* ploc, const float* ppriors, float* pboxes,
                  float* pscores, int32_t* pclasses, int32_t* pcount, Arena& a) {
    t.ssd_detect(pconf, ploc, ppriors, n, P, classes, 0.1f, 0.2f, 0.05f, 0.5f, topk, max_dets, pboxes, pscores,
                 pclasses, pcount, a);
  };
  r.run = [=] {
    call(G(), conf->d(), loc->d(), priors->d(), boxes->d(), scores->d(), det_classes->d(), count->d(), *arena);
  };
  r.check = [=] {
    r.run();
    std::vector<float> wb(D * 4), ws(D);
    std::vector<int32_t> wc(D), wn(static_cast<size_t>(n));
    Arena ca = cpu_arena(C().ssd_detect_scratch_floats(n, P, classes, topk));
    call(C(), conf->host.data(), loc->host.data(), priors->host.data(), wb.data(), ws.data(), wc.data(), wn.data(), ca);
    return count_unequal("ssd_detect det_count", count->download(), wn) +
           count_unequal("ssd_detect det_classes", det_classes->download(), wc) +
           count_wrong("ssd_detect det_boxes", boxes->download(), wb, 1e-6, 1e-7) +
           count_wrong("ssd_detect det_scores", scores->download(), ws, 1e-6, 1e-7);
  };
  return r;
}

// ================= MiniGo: the policy and value losses =================
Case minigo_loss_case(bool value, int n, int moves, const char* label) {
  const size_t m = value ? size_t(n) : size_t(n) * moves;
  auto x = on_gpu(randf(m, 89, value ? -3.0f : -4.0f, value ? 3.0f : 4.0f));  // value logits, or policy logits
  // Targets: the game's outcome +-1 (value), or MCTS visit fractions, each row summing to 1 (policy).
  std::vector<float> th = randf(m, 90, 0.0f, 1.0f);
  if (value) {
    for (float& z : th) z = z < 0.5f ? -1.0f : 1.0f;
  } else {
    for (size_t i = 0; i < size_t(n); ++i) {
      double s = 0;
      for (int j = 0; j < moves; ++j) s += th[i * moves + j];
      for (int j = 0; j < moves; ++j) th[i * moves + j] = float(th[i * moves + j] / s);
    }
  }
  auto targets = on_gpu(std::move(th)), dx = gpu_zeros(m);
  auto arena = gpu_arena(G().minigo_loss_scratch_floats(n));
  auto loss = gpu_loss_sum();
  const float scale = 1.0f / float(n);
  char shape[96];
  if (value) std::snprintf(shape, sizeof shape, "%d %s", n, label);
  else std::snprintf(shape, sizeof shape, "%dx%d %s", n, moves, label);
  Case r{value ? "tanh_mse" : "softmax_xent_soft", shape};
  r.bytes = kF * 3.0 * double(m);  // logits, targets in; gradient out (a double per row in scratch not counted)
  r.flops = (kExp + 6) * double(m);
  auto call = [=](const OpTable& t, const float* px, const float* pt, float* pdx, double* ploss, Arena& a) {
    if (value) t.tanh_mse(px, pt, n, scale, pdx, ploss, a);
    else t.softmax_xent_soft(px, pt, n, moves, scale, pdx, ploss, a);
  };
  r.run = [=] { call(G(), x->d(), targets->d(), dx->d(), loss->d(), *arena); };
  r.check = [=] {
    loss->zero();
    call(G(), x->d(), targets->d(), dx->d(), loss->d(), *arena);
    const double gl = loss->read();
    std::vector<float> want(m);
    Arena ca = cpu_arena(C().minigo_loss_scratch_floats(n));
    double cl = 0.0;
    call(C(), x->host.data(), targets->host.data(), want.data(), &cl, ca);
    return wrong_scalar((r.op + " loss").c_str(), gl, cl, 1e-12, 0.0) +
           count_wrong((r.op + " gradient").c_str(), dx->download(), want, 1e-6, 1e-6);
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
  // The same on the bf16 table (--precision bf16: the GEMM on bf16 tensor cores, the convolutions as
  // bf16_conv_kernel says: with cuDNN forward and backward data on bf16 tensor cores, backward weights on TF32).
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

  // Transformer mini (d256 h4, 32 pairs per GPU of up to 64 tokens) and big (d1024 h16, 256 pairs of up
  // to 256 tokens); rows = pairs x tokens.
  for (bool bwd : {false, true}) {
    add(bwd ? "layernorm_backward" : "layernorm_forward",
        [bwd] { return layernorm_case(bwd, 32 * 64, 256, "transformer mini B32 S64"); });
    add(bwd ? "layernorm_backward" : "layernorm_forward",
        [bwd] { return layernorm_case(bwd, 256 * 256, 1024, "transformer ref B256 S256"); });
    add(bwd ? "dropout_backward" : "dropout_forward",
        [bwd] { return dropout_case(bwd, size_t(32) * 64 * 256, 0.1f, "transformer mini B32 S64 d256"); });
    add(bwd ? "dropout_backward" : "dropout_forward",
        [bwd] { return dropout_case(bwd, size_t(256) * 256 * 1024, 0.1f, "transformer ref B256 S256 d1024"); });
    add(bwd ? "token_embedding_backward" : "token_embedding_forward",
        [bwd] { return token_embedding_case(bwd, 4000, 256, 32, 64, "transformer mini"); });
    add(bwd ? "token_embedding_backward" : "token_embedding_forward",
        [bwd] { return token_embedding_case(bwd, 32000, 1024, 256, 256, "transformer ref"); });
  }
  // Self-attention on the fused QKV (the decoder's causal), cross-attention, and one decoding step:
  // "32x4 k31/138" is 32 sentences x beam 4 rows at step 30, 31 live keys of the cache's 138
  // (max_decode_len = 2 x 64 + 10; 2 x 256 + 10 = 522 at the reference).
  const AttnShape self_mini{"transformer mini self d256 h4 S64 B32", {32, 4, 64, 64, 64, false}, true, 0, 32, 64};
  const AttnShape causal_ref{"transformer ref causal d1024 h16 T256 B256", {256, 16, 256, 256, 64, true}, true, 0, 128,
                             256};
  const AttnShape cross_ref{"transformer ref cross d1024 h16 T256 S256 B256", {256, 16, 256, 256, 64, false}, false,
                            1024, 128, 256};
  const AttnShape decode_mini{"transformer mini decode d256 h4 32x4 k31/138", {128, 4, 1, 138, 64, false}, false,
                              3 * 256, 31, 31};
  const AttnShape decode_ref{"transformer ref decode d1024 h16 64x4 k101/522", {256, 16, 1, 522, 64, false}, false,
                             3 * 1024, 101, 101};
  for (const AttnShape& s : {self_mini, causal_ref, cross_ref, decode_ref})
    add("attention_forward", [s] { return attention_case(Attn::forward, s); });
  for (const AttnShape& s : {decode_mini, decode_ref})  // the cache kept in bf16 (--precision bf16)
    add("attention_forward_bf16_kv", [s] { return attention_case(Attn::forward_bf16_kv, s); });
  for (const AttnShape& s : {self_mini, causal_ref, cross_ref})
    add("attention_backward", [s] { return attention_case(Attn::backward, s); });
  // GNMT mini (hidden 256, 16 pairs per GPU of up to 64 tokens) and reference (hidden 1024, 128 pairs of
  // up to 75): one LSTM step midway, some rows past their end; the attention over all decoder steps.
  for (bool bwd : {false, true}) {
    add(bwd ? "lstm_cell_backward" : "lstm_cell_forward",
        [bwd] { return lstm_case(bwd, 16, 256, 30, 64, "gnmt mini"); });
    add(bwd ? "lstm_cell_backward" : "lstm_cell_forward",
        [bwd] { return lstm_case(bwd, 128, 1024, 40, 75, "gnmt ref"); });
    add(bwd ? "additive_attention_backward" : "additive_attention_forward",
        [bwd] { return additive_attention_case(bwd, 16, 64, 64, 256, "gnmt mini"); });
    add(bwd ? "additive_attention_backward" : "additive_attention_forward",
        [bwd] { return additive_attention_case(bwd, 128, 75, 75, 1024, "gnmt ref"); });
  }
  // Mask R-CNN R-50-FPN (2 800x800 images per GPU: the box head's 512 RoIs each from P2 (those under
  // 112 px), the top-down path, the RPN's NMS) and mini (16 96x96 scenes, one 12x12x64 level, 64 RoIs each).
  for (bool bwd : {false, true}) {
    add(bwd ? "roi_align_backward" : "roi_align_forward",
        [bwd] { return roi_align_case(bwd, 2, 200, 256, 4, 1024, 7, 16.0f, 112.0f, "maskrcnn ref P2"); });
    add(bwd ? "roi_align_backward" : "roi_align_forward",
        [bwd] { return roi_align_case(bwd, 16, 12, 64, 8, 1024, 7, 4.0f, 58.0f, "maskrcnn mini"); });
    add(bwd ? "upsample_nearest2x_backward" : "upsample_nearest2x_forward",
        [bwd] { return upsample_case(bwd, 2, 100, 100, 256, "maskrcnn ref P3->P2"); });
    add(bwd ? "upsample_nearest2x_backward" : "upsample_nearest2x_forward",
        [bwd] { return upsample_case(bwd, 2, 25, 25, 256, "maskrcnn ref P5->P4"); });
  }
  add("nms_sorted", [] { return nms_case(2000, 2000, 0.7f, 800.0f, "maskrcnn ref RPN"); });
  add("nms_sorted", [] { return nms_case(1000, 1000, 0.7f, 96.0f, "maskrcnn mini RPN"); });
  add("rpn_proposals", [] { return rpn_proposals_case(16, {1296}, 1000, 100, 96.0f, "maskrcnn mini train"); });
  add("rpn_proposals",
      [] { return rpn_proposals_case(2, {120000, 30000, 7500, 1875, 507}, 2000, 1000, 800.0f, "maskrcnn ref train"); });
  add("rpn_loss_batch", [] { return rpn_loss_case(16, 1296, 256, "maskrcnn mini"); });
  add("rpn_loss_batch", [] { return rpn_loss_case(2, 159882, 256, "maskrcnn ref"); });
  add("rcnn_box_loss", [] { return box_loss_case(16, 64, 11, "maskrcnn mini"); });
  add("rcnn_box_loss", [] { return box_loss_case(2, 512, 81, "maskrcnn ref"); });
  add("rcnn_mask_loss", [] { return mask_loss_case(16, 16, 28, 11, "maskrcnn mini"); });
  add("rcnn_mask_loss", [] { return mask_loss_case(2, 128, 28, 81, "maskrcnn ref"); });
  add("rcnn_sample_rois", [] { return roi_sample_case(16, 100, 4, 64, 96, 0, "maskrcnn mini"); });
  add("rcnn_sample_rois", [] { return roi_sample_case(2, 2000, 20, 512, 800, 0, "maskrcnn ref"); });
  add("rcnn_mask_targets", [] { return roi_sample_case(16, 100, 4, 64, 96, 16, "maskrcnn mini"); });
  add("rcnn_mask_targets", [] { return roi_sample_case(2, 2000, 20, 512, 800, 128, "maskrcnn ref"); });
  for (bool bwd : {false, true})
    add(bwd ? "roi_align_levels_backward" : "roi_align_levels_forward",
        [bwd] { return roi_align_levels_case(bwd, 2, 800, 256, 1024, 7, "maskrcnn ref box head"); });
  // SSD300 (8732 priors, 81 classes, up to 20 gts an image) and mini (846 priors, 11 classes, 1 to 4
  // items a scene), 32 images per GPU; the workload's IoU 0.5, variances 0.1 / 0.2 (ssd_config.h), 3
  // negatives per positive, and its eval's score threshold 0.05, NMS IoU 0.5, top 200, 200 / 100 dets.
  add("ssd_assign_targets", [] { return ssd_assign_case(32, 8732, 81, 20, "ssd300"); });
  add("ssd_assign_targets", [] { return ssd_assign_case(32, 846, 11, 4, "ssd mini"); });
  add("ssd_multibox_loss", [] { return ssd_loss_case(32, 8732, 81, "ssd300"); });
  add("ssd_multibox_loss", [] { return ssd_loss_case(32, 846, 11, "ssd mini"); });
  add("ssd_detect", [] { return ssd_detect_case(32, 8732, 81, 200, 200, "ssd300 eval"); });
  add("ssd_detect", [] { return ssd_detect_case(32, 846, 11, 200, 100, "ssd mini eval"); });
  // MiniGo 9x9 (82 moves): mini 32 positions per GPU, reference 1024 (8192 over 8 GPUs).
  for (int n : {32, 1024}) {
    const char* label = n == 32 ? "minigo mini 9x9" : "minigo ref 9x9";
    add("softmax_xent_soft", [n, label] { return minigo_loss_case(false, n, 82, label); });
    add("tanh_mse", [n, label] { return minigo_loss_case(true, n, 82, label); });
  }
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
               "usage: kernels_cuda [--op NAME]... [--skip-op NAME]... [--iters N] [--help]\n"
               "  Checks each CUDA op once against the CPU op (exit 1 if wrong), then times it.\n"
               "  --op NAME  only this op (repeatable), e.g. --op conv2d_forward --op embedding_scatter_add\n"
               "  --skip-op NAME  every op but this one (repeatable)\n"
               "  --iters N  timed calls per (op, shape), default 20 (fewer where they would take over 2 s)\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::set<std::string> only, skip;
  int iters = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    }
    if (a == "--op" && i + 1 < argc) {
      only.insert(argv[++i]);
    } else if (a == "--skip-op" && i + 1 < argc) {
      skip.insert(argv[++i]);
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
  for (const std::set<std::string>* names : {&only, &skip})
    for (const auto& name : *names)
      if (std::none_of(entries.begin(), entries.end(), [&](const Entry& e) { return e.op == name; })) {
        std::fprintf(stderr, "kernels_cuda: %s %s: no such op is measured\n", names == &only ? "--op" : "--skip-op",
                     name.c_str());
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
    std::printf("kernels_cuda: bf16 rows: GEMMs on %s, convolutions on %s\n", bf16_gemm_kernel(Device::cuda),
                bf16_conv_kernel(Device::cuda));
    std::printf("%-24s %-44s %10s %10s %13s %9s %9s %6s %6s %6s\n", "op", "shape", "us/call", "MB(napkin)",
                "MFLOP(napkin)", "GB/s", "GFLOP/s", "%BW", "%FP32", "#wrong");
    size_t total_wrong = 0;
    for (const Entry& e : entries) {
      if ((!only.empty() && !only.count(e.op)) || skip.count(e.op)) continue;
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
