// Convolution as im2col + GEMM over NHWC activations and HWIO weights:
//   y[rows, c_out] = cols[rows, k*k*c_in] x W[k*k*c_in, c_out],   rows = n*out_h*out_w.
// The rows are processed in chunks of whole output rows so the im2col buffer stays in L2.
// 1x1 stride-1 unpadded convolutions need no im2col at all. Backward data at stride 1 is itself
// a convolution of dy with the flipped, transposed kernel (a gather, no col2im scatter); at other
// strides it is a GEMM into columns followed by col2im.
// GCC turns the short vector copy loops of im2col back into libc memmove calls (loop pattern
// distribution), which cost ~13% of a ResNet-20 step; keep them as inline vector moves.
// The public conv2d_* functions pick, per shape and pass, this path or the direct one
// (conv_direct.cpp) with conv_use_direct() below.
#pragma GCC optimize("no-tree-loop-distribute-patterns")
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "kernels/cpu/conv_paths.h"
#include "kernels/ops.h"

namespace mlpd {

namespace {

#ifndef MLPD_CONV_CHUNK_FLOATS
#define MLPD_CONV_CHUNK_FLOATS (24 * 1024)
#endif
// 96 KB of columns per chunk (L2-resident): measured best of 12-128K floats.
constexpr size_t kChunkFloats = MLPD_CONV_CHUNK_FLOATS;

// Short copies (a kernel row is k*c_in floats, 48 for 3x3x16) inline as vector moves: a libc
// memcpy call per kernel row cost ~13% of a ResNet-20 step.
inline void copy_floats(float* __restrict dst, const float* __restrict src, int n) {
#if defined(__AVX512F__)
  int i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, _mm512_loadu_ps(src + i));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_maskz_loadu_ps(m, src + i));
  }
#else
  for (int i = 0; i < n; ++i) dst[i] = src[i];
#endif
}

inline void zero_floats(float* dst, int n) {
#if defined(__AVX512F__)
  int i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, _mm512_setzero_ps());
  if (i < n) _mm512_mask_storeu_ps(dst + i, static_cast<__mmask16>((1u << (n - i)) - 1), _mm512_setzero_ps());
#else
  for (int i = 0; i < n; ++i) dst[i] = 0.0f;
#endif
}

bool is_pointwise(const ConvDims& d) { return d.k == 1 && d.stride == 1 && d.pad == 0; }

// Output rows (of out_w pixels each) per chunk: at least one.
int rows_per_chunk(const ConvDims& d) {
  size_t kk = size_t(d.k) * d.k * d.c_in;
  size_t per_row = kk * d.out_w();
  return int(std::max<size_t>(1, kChunkFloats / std::max<size_t>(1, per_row)));
}

// The chunked loop of every GEMM path: cols holds one chunk of output rows' columns (from the
// arena, released on return); fn(r0, r1, cols) handles output rows [r0, r1).
template <typename Fn>
void for_each_row_chunk(const ConvDims& d, Arena& arena, Fn&& fn) {
  const int rows_total = d.n * d.out_h();
  const int chunk = std::min(rows_per_chunk(d), rows_total);
  ArenaScope scope(arena);
  float* cols = arena_floats(arena, size_t(chunk) * d.out_w() * size_t(d.k) * d.k * d.c_in);
  for (int r0 = 0; r0 < rows_total; r0 += chunk) fn(r0, std::min(rows_total, r0 + chunk), cols);
}

// cols[(r - r0)*out_w + ow, (kh*k + kw)*c_in + ci] for output rows r in [r0, r1), r = n*out_h + oh.
void im2col(const ConvDims& d, const float* x, int r0, int r1, float* cols) {
  const int oh_n = d.out_h(), ow_n = d.out_w(), k = d.k, s = d.stride, p = d.pad, ci_n = d.c_in;
  const size_t kk = size_t(k) * k * ci_n;
  for (int r = r0; r < r1; ++r) {
    const int n = r / oh_n, oh = r % oh_n;
    const float* xn = x + size_t(n) * d.h * d.w * ci_n;
    float* crow = cols + size_t(r - r0) * ow_n * kk;
    for (int kh = 0; kh < k; ++kh) {
      const int ih = oh * s - p + kh;
      const bool row_ok = ih >= 0 && ih < d.h;
      for (int ow = 0; ow < ow_n; ++ow) {
        float* dst = crow + size_t(ow) * kk + size_t(kh) * k * ci_n;
        const int iw0 = ow * s - p;
        if (!row_ok) {
          zero_floats(dst, k * ci_n);
          continue;
        }
        const float* src = xn + size_t(ih) * d.w * ci_n;
        if (iw0 >= 0 && iw0 + k <= d.w) {  // whole kernel row inside: one contiguous copy
          copy_floats(dst, src + size_t(iw0) * ci_n, k * ci_n);
        } else {
          for (int kw = 0; kw < k; ++kw) {
            const int iw = iw0 + kw;
            if (iw >= 0 && iw < d.w)
              copy_floats(dst + size_t(kw) * ci_n, src + size_t(iw) * ci_n, ci_n);
            else
              zero_floats(dst + size_t(kw) * ci_n, ci_n);
          }
        }
      }
    }
  }
}

// dx += scatter of cols for output rows [r0, r1).
void col2im_add(const ConvDims& d, const float* cols, int r0, int r1, float* dx) {
  const int oh_n = d.out_h(), ow_n = d.out_w(), k = d.k, s = d.stride, p = d.pad, ci_n = d.c_in;
  const size_t kk = size_t(k) * k * ci_n;
  for (int r = r0; r < r1; ++r) {
    const int n = r / oh_n, oh = r % oh_n;
    float* xn = dx + size_t(n) * d.h * d.w * ci_n;
    const float* crow = cols + size_t(r - r0) * ow_n * kk;
    for (int kh = 0; kh < k; ++kh) {
      const int ih = oh * s - p + kh;
      if (ih < 0 || ih >= d.h) continue;
      float* dst_row = xn + size_t(ih) * d.w * ci_n;
      for (int ow = 0; ow < ow_n; ++ow) {
        const float* src = crow + size_t(ow) * kk + size_t(kh) * k * ci_n;
        for (int kw = 0; kw < k; ++kw) {
          const int iw = ow * s - p + kw;
          if (iw < 0 || iw >= d.w) continue;
          float* dst = dst_row + size_t(iw) * ci_n;
          const float* sv = src + size_t(kw) * ci_n;
          for (int c = 0; c < ci_n; ++c) dst[c] += sv[c];
        }
      }
    }
  }
}

void forward_impl(const ConvDims& d, const float* x, const float* w, float* y, float beta,
                  Arena& arena) {
  const int ow_n = d.out_w(), rows_total = d.n * d.out_h();
  const int kk = d.k * d.k * d.c_in;
  if (is_pointwise(d)) {
    gemm(false, false, rows_total * ow_n, d.c_out, kk, 1.0f, x, kk, w, d.c_out, beta, y, d.c_out);
    return;
  }
  for_each_row_chunk(d, arena, [&](int r0, int r1, float* cols) {
    im2col(d, x, r0, r1, cols);
    gemm(false, false, (r1 - r0) * ow_n, d.c_out, kk, 1.0f, cols, kk, w, d.c_out, beta,
         y + size_t(r0) * ow_n * d.c_out, d.c_out);
  });
}

}  // namespace

size_t gemm_conv_scratch_floats(const ConvDims& d) {
  auto cols_floats = [](const ConvDims& c) -> size_t {
    if (is_pointwise(c)) return 0;
    const size_t rows = size_t(std::min(rows_per_chunk(c), c.n * c.out_h()));
    return rows * c.out_w() * size_t(c.k) * c.k * c.c_in + 16;
  };
  size_t need = cols_floats(d);
  if (d.stride == 1 && d.pad <= d.k - 1 && !is_pointwise(d)) {
    ConvDims t{d.n, d.out_h(), d.out_w(), d.c_out, d.c_in, d.k, 1, d.k - 1 - d.pad};
    need = std::max(need, size_t(d.k) * d.k * d.c_in * d.c_out + 16 + cols_floats(t));
  }
  return need + 16;
}

void gemm_conv_forward(const ConvDims& d, const float* x, const float* w, float* y, Arena& arena) {
  forward_impl(d, x, w, y, 0.0f, arena);
}

void gemm_conv_backward_data(const ConvDims& d, const float* dy, const float* w, float* dx,
                             Arena& arena, bool accumulate) {
  const float beta = accumulate ? 1.0f : 0.0f;
  const int kk = d.k * d.k * d.c_in;
  const int ow_n = d.out_w(), rows_total = d.n * d.out_h();
  if (is_pointwise(d)) {  // dx[rows, c_in] = dy[rows, c_out] * W^T
    gemm(false, true, rows_total * ow_n, d.c_in, d.c_out, 1.0f, dy, d.c_out, w, d.c_out, beta, dx,
         d.c_in);
    return;
  }
  ArenaScope scope(arena);
  if (d.stride == 1 && d.pad <= d.k - 1) {
    // dx = conv(dy, W') with W'[kh, kw, co, ci] = W[k-1-kh, k-1-kw, ci, co], pad' = k-1-pad.
    float* wt = arena_floats(arena, size_t(d.k) * d.k * d.c_in * d.c_out);
    for (int kh = 0; kh < d.k; ++kh)
      for (int kw = 0; kw < d.k; ++kw) {
        const float* src = w + (size_t(d.k - 1 - kh) * d.k + (d.k - 1 - kw)) * d.c_in * d.c_out;
        float* dst = wt + (size_t(kh) * d.k + kw) * d.c_out * d.c_in;
        for (int ci = 0; ci < d.c_in; ++ci)
          for (int co = 0; co < d.c_out; ++co) dst[size_t(co) * d.c_in + ci] = src[size_t(ci) * d.c_out + co];
      }
    ConvDims t{d.n, d.out_h(), d.out_w(), d.c_out, d.c_in, d.k, 1, d.k - 1 - d.pad};
    forward_impl(t, dy, wt, dx, beta, arena);
    return;
  }
  if (!accumulate) std::memset(dx, 0, sizeof(float) * size_t(d.n) * d.h * d.w * d.c_in);
  for_each_row_chunk(d, arena, [&](int r0, int r1, float* cols) {
    gemm(false, true, (r1 - r0) * ow_n, kk, d.c_out, 1.0f, dy + size_t(r0) * ow_n * d.c_out, d.c_out, w, d.c_out,
         0.0f, cols, kk);
    col2im_add(d, cols, r0, r1, dx);
  });
}

void gemm_conv_backward_weights(const ConvDims& d, const float* x, const float* dy, float* dw,
                                Arena& arena) {
  const int kk = d.k * d.k * d.c_in;
  const int ow_n = d.out_w(), rows_total = d.n * d.out_h();
  if (is_pointwise(d)) {  // dW[c_in, c_out] += x^T dy
    gemm(true, false, kk, d.c_out, rows_total * ow_n, 1.0f, x, kk, dy, d.c_out, 1.0f, dw, d.c_out);
    return;
  }
  for_each_row_chunk(d, arena, [&](int r0, int r1, float* cols) {
    im2col(d, x, r0, r1, cols);
    gemm(true, false, kk, d.c_out, (r1 - r0) * ow_n, 1.0f, cols, kk, dy + size_t(r0) * ow_n * d.c_out, d.c_out,
         1.0f, dw, d.c_out);
  });
}

// ---- Per-shape choice between the two paths. ----

namespace {

bool g_direct_enabled = true;

// Measured with bench_conv (GF/s by thread CPU time, batch 64, medians of 11 on a shared
// machine, so +-5%): the direct path wins every 3x3 ResNet-20 shape in all three passes by
// 10-70% (28x28x16->16: fwd 80 -> 95, bwdD 80 -> 95, bwdW 75 -> 117; 7x7x64->64: fwd 81 -> 110,
// bwdW 86 -> 130; stem 28x28x1->16: fwd 18 -> 74, bwdW 18 -> 108) and the 1x1 stride-2
// projections in backward. Kept on GEMM:
//  - 1x1 forward: a plain strided GEMM, OpenBLAS as fast or faster (68-78 vs 60-78);
//  - 1x1 stride 1: pure GEMM in every pass, nothing to save;
//  - backward weights with few input channels (other than the 3x3 single-channel stem, which
//    has its own tile): the tile has c_in rows, too few FMA chains (ResNet-50 stem 7x7/2 c_in 3:
//    74 GEMM vs 58 direct; its forward goes direct, 78 -> 85);
//  - more than 64 channels: not measured, and the direct tiles do not cache-block the weights.
bool direct_rule(const ConvDims& d, ConvPass pass) {
  if (!direct_conv_supported(d, pass)) return false;
  if (std::max(d.c_in, d.c_out) > 64 || is_pointwise(d)) return false;
  switch (pass) {
    case ConvPass::forward: return d.k > 1;
    case ConvPass::backward_data: return true;
    case ConvPass::backward_weights: return d.c_in % 8 == 0 || (d.c_in == 1 && d.k == 3);
  }
  return false;
}

bool g_bf16_direct_enabled = true;

// bf16 operands (kernels/op_table_bf16.cpp), measured with bench_conv_bf16 (GF/s by thread CPU
// time, batch 64 unless said, one thread): against the other bf16 path (operands rounded into
// copies, then the fp32 convolution) the bf16 kernel wins every 3x3 ResNet-20 shape with 16-64
// channels in all three passes (28x28x16->16: fwd 98 -> 191, bwdD 98 -> 190, bwdW 102 -> 194;
// 7x7x64->64: fwd 112 -> 224, bwdD 111 -> 221, bwdW 132 -> 187), the 1x1 stride-2 projections in
// all three (14x14x32->64: fwd 57 -> 117, bwdD 58 -> 121, bwdW 72 -> 133) and 3x3 forward from 3
// input channels up (batch 16, 64x64x3->16: 73 -> 91; x4: 76 -> 133; x8: 81 -> 155). Not picked:
//  - forward from one input channel (the mini stem): half of every pair is the zero that
//    completes it (28x28x1->16: 50 rounded vs 42);
//  - backward weights with fewer than 8 input channels, as in the fp32 rule (too few rows per
//    tile; the stem's own fp32 tile has no bf16 twin);
//  - pointwise (1x1, stride 1) convolutions and more than 64 channels, as in the fp32 rule:
//    the first are GEMMs, the second not measured.
bool bf16_direct_rule(const ConvDims& d, ConvPass pass) {
  if (!direct_conv_bf16_supported(d, pass)) return false;
  if (std::max(d.c_in, d.c_out) > 64 || is_pointwise(d)) return false;
  switch (pass) {
    case ConvPass::forward: return d.c_in >= 2;
    case ConvPass::backward_data: return true;
    case ConvPass::backward_weights: return d.c_in % 8 == 0;
  }
  return false;
}

}  // namespace

void conv_set_direct_enabled(bool enabled) { g_direct_enabled = enabled; }
void conv_bf16_set_direct_enabled(bool enabled) { g_bf16_direct_enabled = enabled; }

bool conv_bf16_use_direct(const ConvDims& d, ConvPass pass) {
  return g_bf16_direct_enabled && bf16_direct_rule(d, pass);
}

bool conv_use_direct(const ConvDims& d, ConvPass pass) {
  return g_direct_enabled && direct_rule(d, pass);
}

// Sized for whichever path the rule picks (ignoring the benchmark switch, which only ever
// moves work to the GEMM path).
size_t conv2d_scratch_floats(const ConvDims& d) {
  size_t need = gemm_conv_scratch_floats(d);
  for (ConvPass p : {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_weights})
    if (direct_rule(d, p)) need = std::max(need, direct_conv_scratch_floats(d));
  return need;
}

void conv2d_forward(const ConvDims& d, const float* x, const float* w, float* y, Arena& arena) {
  if (conv_use_direct(d, ConvPass::forward))
    direct_conv_forward(d, x, w, y, arena);
  else
    gemm_conv_forward(d, x, w, y, arena);
}

void conv2d_backward_data(const ConvDims& d, const float* dy, const float* w, float* dx,
                          Arena& arena, bool accumulate) {
  if (conv_use_direct(d, ConvPass::backward_data))
    direct_conv_backward_data(d, dy, w, dx, arena, accumulate);
  else
    gemm_conv_backward_data(d, dy, w, dx, arena, accumulate);
}

void conv2d_backward_weights(const ConvDims& d, const float* x, const float* dy, float* dw,
                             Arena& arena) {
  if (conv_use_direct(d, ConvPass::backward_weights))
    direct_conv_backward_weights(d, x, dy, dw, arena);
  else
    gemm_conv_backward_weights(d, x, dy, dw, arena);
}

}  // namespace mlpd
