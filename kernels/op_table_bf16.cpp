// The bf16 op tables (core/precision.h): each device's fp32 table with its GEMM and convolution
// ops wrapped. Activations and activation gradients leave every wrapped op as bf16 values; what an
// op accumulates into (weight gradients, `accumulate` outputs, beta != 0) stays fp32.
//
// gemm and linear pack their operands to bf16 (2 bytes a value, bf16_pack_rows) and run the
// device's bf16 GEMM (gemm_bf16: AVX512-BF16 or widened OpenBLAS on the CPU, bf16 tensor cores on
// CUDA) with fp32 sums. A convolution on the CPU runs our bf16 direct kernel (vdpbf16ps) where its
// rule picks it (kernels/cpu/conv_paths.h); on CUDA, forward and overwriting backward data run on
// cuDNN's bf16 tensor cores where it has an algorithm (kernels/cuda/conv_bf16.h). Elsewhere the
// convolutions round their operands to bf16 values held in fp32 and run the device's fp32
// convolution on them (products of bf16 values are exact in fp32, so this is a bf16 convolution
// with fp32 accumulation); on CUDA with TF32 tensor-core math, which holds a bf16 operand exactly.
// The fp32 table never uses tensor cores.
// The ops read and write fp32 buffers; a layer may keep what it saves in bf16 between ops where
// that loses nothing (the CNN units, src/nn/conv_bn.h; the transformer's layers) and widen it for
// the next op (bf16_unpack_rows), or hand its bits to the *_bf16_input passes below.
#include <algorithm>
#include <array>
#include <cstddef>
#include <utility>

#include "core/arena.h"
#include "kernels/cpu/conv_paths.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/device.h"
#include "kernels/op_table.h"
#ifdef MLPD_HAVE_CUDA
#include "kernels/cuda/conv_bf16.h"
#include "kernels/cuda/runtime.h"
#endif

namespace mlpd {

namespace {


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

// Scratch for the bf16 operands of gemm and linear (their signatures carry no Arena): one buffer
// per device and thread, grown to the largest call, so steady-state steps never allocate.
template <Device D>
uint16_t* operand_scratch(size_t halves) {
  struct Scratch {
    DeviceBytes bytes = no_device_bytes();
    size_t halves = 0;
  };
  thread_local Scratch s;
  if (halves > s.halves) {
    synchronize(D);  // queued kernels may still read the old buffer
    s.halves = std::max(halves, s.halves + s.halves / 2);
    s.bytes = alloc_on(D, s.halves * sizeof(uint16_t));
  }
  return as<uint16_t>(s.bytes);
}

constexpr size_t kAlignHalves = 32;  // 64 bytes
size_t aligned_halves(size_t n) { return (n + kAlignHalves - 1) / kAlignHalves * kAlignHalves; }

// A GEMM operand: a [rows x cols] block read at leading dimension ld (null: not needed).
struct Operand {
  const float* data;
  int rows, cols, ld;
};

// The operands packed to bf16, dense and one after another in the scratch (one allocation, so no
// growth moves an operand packed before it).
template <Device D, size_t N>
std::array<uint16_t*, N> pack_operands(const std::array<Operand, N>& ops) {
  std::array<size_t, N> offset{};
  size_t total = 0;
  for (size_t i = 0; i < N; ++i) {
    offset[i] = total;
    if (ops[i].data) total += aligned_halves(size_t(ops[i].rows) * size_t(ops[i].cols));
  }
  uint16_t* base = operand_scratch<D>(total);
  std::array<uint16_t*, N> packed{};
  for (size_t i = 0; i < N; ++i) {
    if (!ops[i].data) continue;
    packed[i] = base + offset[i];
    ops_for(D).bf16_pack_rows(ops[i].data, ops[i].rows, ops[i].cols, ops[i].ld, packed[i], ops[i].cols);
  }
  return packed;
}

template <Device D>
void gemm_via_bf16(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                   const float* b, int ldb, float beta, float* c, int ldc) {
  const OpTable& o = ops_for(D);
  if (m <= 0 || n <= 0) return;
  if (k > 0) {
    const int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
    const int b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
    const auto [a16, b16] = pack_operands<D, 2>({{{a, a_rows, a_cols, lda}, {b, b_rows, b_cols, ldb}}});
    o.gemm_bf16(trans_a, trans_b, m, n, k, alpha, a16, a_cols, b16, b_cols, beta, c, ldc);
  } else {
    o.gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  if (beta == 0.0f) o.bf16_round_rows(c, m, n, ldc, c, ldc);
}

// The fp32 linear's structure (bias broadcast, then the GEMM adds to it) on bf16 operands.
template <Device D>
void linear_forward_bf16(const float* x, int n, int in, int out, const float* w, const float* b, float* y) {
  const OpTable& o = ops_for(D);
  if (n <= 0 || out <= 0) return;
  const auto [x16, w16] = pack_operands<D, 2>({{{x, n, in, in}, {w, in, out, out}}});
  if (b) o.copy_rows(b, 0, n, out, y, out);
  o.gemm_bf16(false, false, n, out, in, 1.0f, x16, in, w16, out, b ? 1.0f : 0.0f, y, out);
  o.bf16_round(y, y, size_t(n) * size_t(out));
}

// dx and dw from bf16 operands; the bias gradient is a sum, not a product: of dy as it came.
template <Device D>
void linear_backward_on_packed(const uint16_t* x16, const uint16_t* dy16, const uint16_t* w16, const float* dy, int n,
                               int in, int out, float* dx, float* dw, float* db) {
  const OpTable& o = ops_for(D);
  if (dx) {
    o.gemm_bf16(false, true, n, in, out, 1.0f, dy16, out, w16, out, 0.0f, dx, in);
    o.bf16_round(dx, dx, size_t(n) * size_t(in));
  }
  o.gemm_bf16(true, false, in, out, n, 1.0f, x16, in, dy16, out, 1.0f, dw, out);
  if (db) o.bias_grad(dy, n, out, db);
}

template <Device D>
void linear_backward_bf16(const float* x, const float* dy, int n, int in, int out, const float* w, float* dx,
                          float* dw, float* db) {
  const auto [dy16, x16, w16] =
      pack_operands<D, 3>({{{dy, n, out, out}, {x, n, in, in}, {dx ? w : nullptr, in, out, out}}});
  linear_backward_on_packed<D>(x16, dy16, w16, dy, n, in, out, dx, dw, db);
}

template <Device D>
void linear_backward_x16(const uint16_t* x16, const float* dy, int n, int in, int out, const float* w, float* dx,
                         float* dw, float* db) {
  const auto [dy16, w16] = pack_operands<D, 2>({{{dy, n, out, out}, {dx ? w : nullptr, in, out, out}}});
  linear_backward_on_packed<D>(x16, dy16, w16, dy, n, in, out, dx, dw, db);
}

// Whether the CPU's bf16 direct kernel runs this pass (conv_bf16_use_direct, its switch included);
// it reads bf16 bits as they are. Every bf16 convolution pass asks this one question.
bool cpu_bf16_kernel_runs(Device dev, const ConvDims& d, ConvPass pass) {
  return dev == Device::cpu && conv_bf16_use_direct(d, pass);
}

// The GPU's bf16 tensor-core pass (kernels/cuda/conv_bf16.h): forward, and backward data that
// overwrites dx (an accumulating dx adds an unrounded sum, which that path's bf16 output is not).
// a16: the image operand's bits, or null to pack a. False where it did not run.
bool cuda_bf16_pass_ran(ConvPass pass, const ConvDims& d, const float* a, const uint16_t* a16, const float* w,
                        float* out, Arena& arena, bool accumulate) {
#ifdef MLPD_HAVE_CUDA
  if (pass == ConvPass::forward) return cuda::conv2d_forward_bf16_tensor_cores(d, a, a16, w, out, arena);
  if (pass == ConvPass::backward_data && !accumulate)
    return cuda::conv2d_backward_data_bf16_tensor_cores(d, a, a16, w, out, arena);
#else
  (void)pass, (void)d, (void)a, (void)a16, (void)w, (void)out, (void)arena, (void)accumulate;
#endif
  return false;
}

size_t cuda_bf16_scratch_floats(const ConvDims& d) {
#ifdef MLPD_HAVE_CUDA
  return cuda::conv2d_bf16_tensor_core_scratch_floats(d);
#else
  (void)d;
  return 0;
#endif
}

size_t conv_x_floats(const ConvDims& d) { return size_t(d.n) * d.h * d.w * d.c_in; }
size_t conv_y_floats(const ConvDims& d) { return size_t(d.n) * d.out_h() * d.out_w() * d.c_out; }
size_t conv_w_floats(const ConvDims& d) { return size_t(d.k) * d.k * d.c_in * d.c_out; }

// Each pass's scratch on the path it takes (conv_bf16_use_direct, its switch included): the CPU's
// bf16 kernel's, or the fp32 op's after that pass's two rounded operands. Turning the kernel off
// moves passes to the rounded path, so a test or benchmark that does so sizes its arena for both.
// On CUDA the larger of the tensor-core path's and the rounded path's (its fallback).
template <Device D>
size_t conv2d_scratch_floats_bf16(const ConvDims& d) {
  const size_t x = arena_floats_span(conv_x_floats(d)), y = arena_floats_span(conv_y_floats(d)),
               w = arena_floats_span(conv_w_floats(d));
  const size_t fp32 = ops_for(D).conv2d_scratch_floats(d);
  const std::array<std::pair<ConvPass, size_t>, 3> passes{
      {{ConvPass::forward, x + w}, {ConvPass::backward_data, y + w}, {ConvPass::backward_weights, x + y}}};
  size_t need = D == Device::cuda ? cuda_bf16_scratch_floats(d) : 0;
  for (const auto& [pass, operands] : passes) {
    if (cpu_bf16_kernel_runs(D, d, pass)) {
      need = std::max(need, direct_conv_bf16_scratch_floats(d));
      continue;
    }
    need = std::max(need, fp32 + operands);
  }
  return need;
}

// The device's own bf16 convolution, where it runs this pass: the GPU's tensor-core path, or the
// CPU's bf16 direct kernel where its rule picks it. Each rounds its operands as it packs them, and
// what it overwrites as it stores it.
template <Device D>
bool conv_pass_native_bf16(ConvPass pass, const ConvDims& d, const float* a, const float* b, float* out,
                           Arena& arena, bool accumulate) {
  if (D == Device::cuda) return cuda_bf16_pass_ran(pass, d, a, nullptr, b, out, arena, accumulate);
  if (!cpu_bf16_kernel_runs(D, d, pass)) return false;
  if (pass == ConvPass::forward) direct_conv_bf16_forward(d, a, b, out, arena);
  if (pass == ConvPass::backward_data) direct_conv_bf16_backward_data(d, a, b, out, arena, accumulate);
  if (pass == ConvPass::backward_weights) direct_conv_bf16_backward_weights(d, a, b, out, arena);
  return true;
}

// One convolution pass on bf16 operands (x and w, dy and w, or x and dy): the CPU's bf16 kernel,
// or else both operands rounded into the arena and the fp32 pass run on them. Its output is
// rounded unless it accumulates (dw always; dx if asked).
template <Device D>
void conv_pass_bf16(ConvPass pass, const ConvDims& d, const float* a, size_t a_floats, const float* b,
                    size_t b_floats, float* out, Arena& arena, bool accumulate) {
  const OpTable& o = ops_for(D);
  if (conv_pass_native_bf16<D>(pass, d, a, b, out, arena, accumulate)) return;
  {
    ArenaScope scope(arena);
    float* a16 = arena_floats(arena, a_floats);
    float* b16 = arena_floats(arena, b_floats);
    o.bf16_round(a, a16, a_floats);
    o.bf16_round(b, b16, b_floats);
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
  t.gemm = &gemm_via_bf16<D>;
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

namespace {

// An operand of `floats` values (d.n images) as fp32: itself, or its bits widened into the arena
// (the caller's scope).
const float* as_fp32(Device, const ConvDims&, const float* p, size_t, Arena&) { return p; }
const float* as_fp32(Device dev, const ConvDims& d, const uint16_t* p, size_t floats, Arena& a) {
  return bf16_widened_rows(ops_for(dev), a, p, d.n, d.n > 0 ? floats / size_t(d.n) : 0);
}

template <class X, class DY>
void backward_weights_from(Device dev, const ConvDims& d, const X* x, const DY* dy, float* dw, Arena& arena) {
  if (cpu_bf16_kernel_runs(dev, d, ConvPass::backward_weights))
    return direct_conv_bf16_backward_weights(d, x, dy, dw, arena);
  ArenaScope scope(arena);
  ops_for(dev, Precision::bf16)
      .conv2d_backward_weights(d, as_fp32(dev, d, x, conv_x_floats(d), arena),
                               as_fp32(dev, d, dy, conv_y_floats(d), arena), dw, arena);
}

}  // namespace

void conv2d_forward_bf16_input(Device dev, const ConvDims& d, const uint16_t* x16, const float* w, float* y,
                               Arena& arena) {
  if (cpu_bf16_kernel_runs(dev, d, ConvPass::forward)) return direct_conv_bf16_forward(d, x16, w, y, arena);
  if (dev == Device::cuda && cuda_bf16_pass_ran(ConvPass::forward, d, nullptr, x16, w, y, arena, false)) return;
  ArenaScope scope(arena);
  ops_for(dev, Precision::bf16).conv2d_forward(d, as_fp32(dev, d, x16, conv_x_floats(d), arena), w, y, arena);
}

void conv2d_backward_data_bf16_input(Device dev, const ConvDims& d, const uint16_t* dy16, const float* w, float* dx,
                                     Arena& arena, bool accumulate) {
  if (cpu_bf16_kernel_runs(dev, d, ConvPass::backward_data))
    return direct_conv_bf16_backward_data(d, dy16, w, dx, arena, accumulate);
  if (dev == Device::cuda && cuda_bf16_pass_ran(ConvPass::backward_data, d, nullptr, dy16, w, dx, arena, accumulate))
    return;
  ArenaScope scope(arena);
  ops_for(dev, Precision::bf16)
      .conv2d_backward_data(d, as_fp32(dev, d, dy16, conv_y_floats(d), arena), w, dx, arena, accumulate);
}

void conv2d_backward_weights_bf16_input(Device dev, const ConvDims& d, const uint16_t* x16, const float* dy,
                                        float* dw, Arena& arena) {
  backward_weights_from(dev, d, x16, dy, dw, arena);
}

void conv2d_backward_weights_bf16_input(Device dev, const ConvDims& d, const float* x, const uint16_t* dy16,
                                        float* dw, Arena& arena) {
  backward_weights_from(dev, d, x, dy16, dw, arena);
}

size_t conv2d_scratch_floats_bf16_input(Device dev, const ConvDims& d, Bf16Operand kept) {
  const bool image = kept == Bf16Operand::image;
  const ConvPass other = image ? ConvPass::forward : ConvPass::backward_data;
  const bool widens = !cpu_bf16_kernel_runs(dev, d, other) || !cpu_bf16_kernel_runs(dev, d, ConvPass::backward_weights);
  const size_t widened = widens ? arena_floats_span(image ? conv_x_floats(d) : conv_y_floats(d)) : 0;
  return ops_for(dev, Precision::bf16).conv2d_scratch_floats(d) + widened;
}

void linear_backward_bf16_input(Device d, const uint16_t* x16, const float* dy, int n, int in, int out, const float* w,
                                float* dx, float* dw, float* db) {
  if (d == Device::cpu) return linear_backward_x16<Device::cpu>(x16, dy, n, in, out, w, dx, dw, db);
  linear_backward_x16<Device::cuda>(x16, dy, n, in, out, w, dx, dw, db);
}

float* bf16_widened_rows(const OpTable& o, Arena& a, const uint16_t* x16, int rows, size_t width) {
  float* x = arena_floats(a, size_t(rows) * width);
  const int w = static_cast<int>(width);
  if (rows > 0) o.bf16_unpack_rows(x16, rows, w, w, x, w);
  return x;
}

const char* bf16_gemm_kernel(Device d) { return d == Device::cuda ? "cublas" : gemm_bf16_path_name(); }

const char* bf16_conv_kernel(Device d) {
#ifdef MLPD_HAVE_CUDA
  if (d == Device::cuda) return cuda::conv2d_bf16_path_name();
#endif
  (void)d;
  return direct_conv_bf16_available() ? "direct-bf16 where its rule picks it, else fp32 on rounded operands"
                                      : "fp32 on rounded operands";
}

}  // namespace mlpd
