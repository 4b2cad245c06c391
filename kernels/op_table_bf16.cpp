// The bf16 op tables (core/precision.h): each device's fp32 table with its GEMM and convolution
// ops wrapped. A wrapper rounds the operands to bf16 into scratch, runs the device's fp32 op on
// them (products of bf16 values are exact in fp32, so this is a bf16 GEMM with fp32 accumulation)
// and rounds what it overwrote: activations and activation gradients leave as bf16 values. What
// it accumulates into (weight gradients, `accumulate` outputs, beta != 0) stays fp32.
//
// On CUDA the wrapped op runs with tensor-core math (TF32, which holds a bf16 operand exactly),
// so the GEMMs and cuDNN convolutions run on tensor cores; the fp32 table never does.
// Storage stays fp32: a bf16 activation takes 4 bytes, as in fp32.
#include <algorithm>
#include <cstddef>

#include "core/arena.h"
#include "kernels/device.h"
#include "kernels/op_table.h"
#ifdef MLPD_HAVE_CUDA
#include "kernels/cuda/runtime.h"
#endif

namespace mlpd {

namespace {

constexpr size_t kAlignFloats = 16;  // 64 bytes, as the Arena aligns
size_t aligned(size_t floats) { return (floats + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

// Tensor-core math for the span of one wrapped op (CUDA; nothing on the CPU).
struct TensorCoreMath {
  Device device;
  explicit TensorCoreMath(Device d) : device(d) {
#ifdef MLPD_HAVE_CUDA
    if (device == Device::cuda) cuda::set_tensor_core_math(true);
#endif
  }
  ~TensorCoreMath() {
#ifdef MLPD_HAVE_CUDA
    if (device == Device::cuda) cuda::set_tensor_core_math(false);
#endif
  }
  TensorCoreMath(const TensorCoreMath&) = delete;
  TensorCoreMath& operator=(const TensorCoreMath&) = delete;
};

// Scratch for the rounded operands of gemm and linear (their signatures carry no Arena): one
// buffer per device and thread, grown to the largest call, so steady-state steps never allocate.
template <Device D>
float* operand_scratch(size_t floats) {
  struct Scratch {
    DeviceBytes bytes = no_device_bytes();
    size_t floats = 0;
  };
  thread_local Scratch s;
  if (floats > s.floats) {
    synchronize(D);  // queued kernels may still read the old buffer
    s.floats = std::max(floats, s.floats + s.floats / 2);
    s.bytes = alloc_on(D, s.floats * sizeof(float));
  }
  return as<float>(s.bytes);
}

template <Device D>
void gemm_bf16(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
               const float* b, int ldb, float beta, float* c, int ldc) {
  const OpTable& o = ops_for(D);
  if (m <= 0 || n <= 0) return;
  if (k > 0) {
    const int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
    const int b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
    const size_t a_floats = aligned(size_t(a_rows) * size_t(a_cols));
    float* a16 = operand_scratch<D>(a_floats + size_t(b_rows) * size_t(b_cols));
    float* b16 = a16 + a_floats;
    o.bf16_round_rows(a, a_rows, a_cols, lda, a16, a_cols);
    o.bf16_round_rows(b, b_rows, b_cols, ldb, b16, b_cols);
    TensorCoreMath tc(D);
    o.gemm(trans_a, trans_b, m, n, k, alpha, a16, a_cols, b16, b_cols, beta, c, ldc);
  } else {
    o.gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  if (beta == 0.0f) o.bf16_round_rows(c, m, n, ldc, c, ldc);
}

template <Device D>
void linear_forward_bf16(const float* x, int n, int in, int out, const float* w, const float* b, float* y) {
  const OpTable& o = ops_for(D);
  const size_t nx = aligned(size_t(n) * size_t(in)), nw = size_t(in) * size_t(out);
  float* x16 = operand_scratch<D>(nx + nw);
  float* w16 = x16 + nx;
  o.bf16_round(x, x16, size_t(n) * size_t(in));
  o.bf16_round(w, w16, nw);
  {
    TensorCoreMath tc(D);
    o.linear_forward(x16, n, in, out, w16, b, y);
  }
  o.bf16_round(y, y, size_t(n) * size_t(out));
}

template <Device D>
void linear_backward_bf16(const float* x, const float* dy, int n, int in, int out, const float* w, float* dx,
                          float* dw, float* db) {
  const OpTable& o = ops_for(D);
  const size_t nx = aligned(size_t(n) * size_t(in)), ndy = aligned(size_t(n) * size_t(out));
  const size_t nw = size_t(in) * size_t(out);
  float* x16 = operand_scratch<D>(nx + ndy + nw);
  float* dy16 = x16 + nx;
  float* w16 = dy16 + ndy;
  o.bf16_round(x, x16, size_t(n) * size_t(in));
  o.bf16_round(dy, dy16, size_t(n) * size_t(out));
  if (dx) o.bf16_round(w, w16, nw);
  {
    TensorCoreMath tc(D);
    o.linear_backward(x16, dy16, n, in, out, w16, dx, dw, db);
  }
  if (dx) o.bf16_round(dx, dx, size_t(n) * size_t(in));
}

size_t conv_x_floats(const ConvDims& d) { return size_t(d.n) * d.h * d.w * d.c_in; }
size_t conv_y_floats(const ConvDims& d) { return size_t(d.n) * d.out_h() * d.out_w() * d.c_out; }
size_t conv_w_floats(const ConvDims& d) { return size_t(d.k) * d.k * d.c_in * d.c_out; }

// The fp32 op's scratch after the two rounded operands of whichever pass needs the most.
template <Device D>
size_t conv2d_scratch_floats_bf16(const ConvDims& d) {
  const size_t x = aligned(conv_x_floats(d)), y = aligned(conv_y_floats(d)), w = aligned(conv_w_floats(d));
  return ops_for(D).conv2d_scratch_floats(d) + std::max({x + w, y + w, x + y});
}

enum class ConvPass { forward, backward_data, backward_weights };

// One convolution pass: its two operands (x and w, dy and w, or x and dy) rounded into the arena,
// the fp32 pass on them, and its output rounded unless it accumulates (dw always; dx if asked).
template <Device D>
void conv_pass_bf16(ConvPass pass, const ConvDims& d, const float* a, size_t a_floats, const float* b,
                    size_t b_floats, float* out, Arena& arena, bool accumulate) {
  const OpTable& o = ops_for(D);
  ArenaScope scope(arena);
  float* a16 = arena_floats(arena, a_floats);
  float* b16 = arena_floats(arena, b_floats);
  o.bf16_round(a, a16, a_floats);
  o.bf16_round(b, b16, b_floats);
  {
    TensorCoreMath tc(D);
    if (pass == ConvPass::forward) o.conv2d_forward(d, a16, b16, out, arena);
    if (pass == ConvPass::backward_data) o.conv2d_backward_data(d, a16, b16, out, arena, accumulate);
    if (pass == ConvPass::backward_weights) o.conv2d_backward_weights(d, a16, b16, out, arena);
  }
  if (pass == ConvPass::forward) o.bf16_round(out, out, conv_y_floats(d));
  if (pass == ConvPass::backward_data && !accumulate) o.bf16_round(out, out, conv_x_floats(d));
}

template <Device D>
void conv2d_forward_bf16(const ConvDims& d, const float* x, const float* w, float* y, Arena& arena) {
  conv_pass_bf16<D>(ConvPass::forward, d, x, conv_x_floats(d), w, conv_w_floats(d), y, arena, false);
}

template <Device D>
void conv2d_backward_data_bf16(const ConvDims& d, const float* dy, const float* w, float* dx, Arena& arena,
                               bool accumulate) {
  conv_pass_bf16<D>(ConvPass::backward_data, d, dy, conv_y_floats(d), w, conv_w_floats(d), dx, arena, accumulate);
}

template <Device D>
void conv2d_backward_weights_bf16(const ConvDims& d, const float* x, const float* dy, float* dw, Arena& arena) {
  conv_pass_bf16<D>(ConvPass::backward_weights, d, x, conv_x_floats(d), dy, conv_y_floats(d), dw, arena, true);
}

template <Device D>
OpTable make_bf16_table() {
  OpTable t = ops_for(D);
  t.precision = Precision::bf16;
  t.gemm = &gemm_bf16<D>;
  t.linear_forward = &linear_forward_bf16<D>;
  t.linear_backward = &linear_backward_bf16<D>;
  t.conv2d_scratch_floats = &conv2d_scratch_floats_bf16<D>;
  t.conv2d_forward = &conv2d_forward_bf16<D>;
  t.conv2d_backward_data = &conv2d_backward_data_bf16<D>;
  t.conv2d_backward_weights = &conv2d_backward_weights_bf16<D>;
  return t;
}

}  // namespace

const OpTable& ops_for(Device d, Precision p) {
  if (p == Precision::fp32) return ops_for(d);
  if (d == Device::cpu) {
    static const OpTable cpu = make_bf16_table<Device::cpu>();
    return cpu;
  }
  static const OpTable cuda = make_bf16_table<Device::cuda>();  // throws where the build has no CUDA
  return cuda;
}

}  // namespace mlpd
