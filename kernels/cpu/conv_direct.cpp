// Direct NHWC convolution with AVX-512 register tiles: no im2col, no GEMM packing.
//
// One micro-kernel, tile<R, V>, serves forward and backward-data: it accumulates R output
// pixels (consecutive along a row, `ors` floats apart) x V vectors of 16 output channels in
// zmm registers, walking a list of kernel taps and, per tap, the reduction channels: each step
// loads V weight vectors and broadcasts one input value per pixel (R*V FMAs for R+V loads).
//   forward:        input = x copied into a zero-padded image (no bounds checks in the tile),
//                   taps = all k*k, weights HWIO as stored.
//   backward data:  dx = transposed conv of dy. The dx pixels are split by parity (ih % s,
//                   iw % s); each class is a stride-1 correlation of a zero-bordered dy with
//                   the subset of taps that reach it, weights transposed to [k, k, c_out, c_in].
//                   At stride 1 there is one class with all taps (the flipped-kernel conv).
// Backward weights uses wtile<R, V>: for one tap it accumulates an R (c_in) x 16V (c_out) block
// of dW over all the pixels of one image in registers (blocked summation: one add into dW per
// image), broadcasting x and loading dy vectors; the valid pixel range is clipped per tap, so
// no padding copy. With a single input channel and a 3x3 kernel (the stem) that tile would have
// one row, so wtile_c1k3 makes the 9 taps the rows instead, over a zero-padded image.
// All loops run in a fixed order: results are bit-identical run to run.
#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "core/check.h"
#include "kernels/cpu/conv_direct_common.h"
#include "kernels/cpu/conv_paths.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace mlpd {

namespace {

using namespace direct_conv;

size_t fwd_scratch(const ConvDims& d) {
  return size_t(d.h + 2 * d.pad) * (d.w + 2 * d.pad) * d.c_in + 32;
}
size_t bwd_data_scratch(const ConvDims& d) {
  const int b = dy_border(d);
  return size_t(d.out_h() + 2 * b) * (d.out_w() + 2 * b) * d.c_out + 32 +
         size_t(d.k) * d.k * d.c_in * d.c_out + 32;
}

#if defined(__AVX512F__)

// out[r * ors + 16v + j] (+)= sum_t sum_c in[toff[t] + r * rs + c] * tw[t][c * ldw + 16v + j]
// RS > 0 fixes the pixel stride rs at compile time, so each broadcast is one FMA with a
// constant displacement (a runtime stride spills ~half the R row pointers to the stack).
template <int R, int V, int RS>
void tile(const float* __restrict in, ptrdiff_t rs_runtime, const int* __restrict toff,
          const float* const* __restrict tw, int nt, int nc, ptrdiff_t ldw, float* __restrict out,
          ptrdiff_t ors, bool accumulate) {
  const ptrdiff_t rs = RS > 0 ? RS : rs_runtime;
  __m512 acc[R][V];
#pragma GCC unroll 32
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      acc[r][v] = accumulate ? _mm512_loadu_ps(out + r * ors + 16 * v) : _mm512_setzero_ps();
  for (int t = 0; t < nt; ++t) {
    const float* ip = in + toff[t];
    const float* wp = tw[t];
    for (int c = 0; c < nc; ++c) {
      __m512 wv[V];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) wv[v] = _mm512_loadu_ps(wp + c * ldw + 16 * v);
#pragma GCC unroll 32
      for (int r = 0; r < R; ++r) {
        const __m512 b = _mm512_set1_ps(ip[r * rs + c]);
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(b, wv[v], acc[r][v]);
      }
    }
  }
#pragma GCC unroll 32
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(out + r * ors + 16 * v, acc[r][v]);
}

// dw[r * ldw + 16v + j] += sum_{i < rows, q < cols}
//                              x[i * xrow + q * xs + r] * dy[i * dyrow + q * ldy + 16v + j]
template <int R, int V>
void wtile(const float* __restrict x, ptrdiff_t xrow, ptrdiff_t xs, const float* __restrict dy,
           ptrdiff_t dyrow, ptrdiff_t ldy, int rows, int cols, float* __restrict dw,
           ptrdiff_t ldw) {
  __m512 acc[R][V];
#pragma GCC unroll 32
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int i = 0; i < rows; ++i) {
    const float* xp = x + i * xrow;
    const float* gp = dy + i * dyrow;
    for (int q = 0; q < cols; ++q, xp += xs, gp += ldy) {
      __m512 g[V];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) g[v] = _mm512_loadu_ps(gp + 16 * v);
#pragma GCC unroll 32
      for (int r = 0; r < R; ++r) {
        const __m512 b = _mm512_set1_ps(xp[r]);
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(b, g[v], acc[r][v]);
      }
    }
  }
#pragma GCC unroll 32
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      float* o = dw + r * ldw + 16 * v;
      _mm512_storeu_ps(o, _mm512_add_ps(_mm512_loadu_ps(o), acc[r][v]));
    }
}

// Backward weights for a single input channel and a 3x3 kernel (the stem): the c_in rows of
// wtile would be one, a single FMA chain. Here the 9 taps are the rows instead:
// dw[t * ldw + 16v + j] += sum_{oh, ow} xp[(oh*s + kh) * wp + ow*s + kw] * dy[...], t = kh*3 + kw,
// over one zero-padded image xp.
template <int V>
void wtile_c1k3(const float* __restrict xp, ptrdiff_t wp, int s, const float* __restrict dy,
                ptrdiff_t ldy, int oh_n, int ow_n, float* __restrict dw, ptrdiff_t ldw) {
  __m512 acc[9][V];
#pragma GCC unroll 9
  for (int t = 0; t < 9; ++t)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[t][v] = _mm512_setzero_ps();
  for (int oh = 0; oh < oh_n; ++oh) {
    const float* r0 = xp + ptrdiff_t(oh) * s * wp;
    const float* r1 = r0 + wp;
    const float* r2 = r1 + wp;
    const float* gp = dy + ptrdiff_t(oh) * ow_n * ldy;
    for (int ow = 0; ow < ow_n; ++ow, r0 += s, r1 += s, r2 += s, gp += ldy) {
      __m512 g[V];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) g[v] = _mm512_loadu_ps(gp + 16 * v);
      const float* rows[3] = {r0, r1, r2};
#pragma GCC unroll 3
      for (int kh = 0; kh < 3; ++kh)
#pragma GCC unroll 3
        for (int kw = 0; kw < 3; ++kw) {
          const __m512 b = _mm512_set1_ps(rows[kh][kw]);
#pragma GCC unroll 4
          for (int v = 0; v < V; ++v)
            acc[kh * 3 + kw][v] = _mm512_fmadd_ps(b, g[v], acc[kh * 3 + kw][v]);
        }
    }
  }
#pragma GCC unroll 9
  for (int t = 0; t < 9; ++t)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      float* o = dw + t * ldw + 16 * v;
      _mm512_storeu_ps(o, _mm512_add_ps(_mm512_loadu_ps(o), acc[t][v]));
    }
}

using TileFn = void (*)(const float*, ptrdiff_t, const int*, const float* const*, int, int,
                        ptrdiff_t, float*, ptrdiff_t, bool);
using WTileFn = void (*)(const float*, ptrdiff_t, ptrdiff_t, const float*, ptrdiff_t, ptrdiff_t,
                         int, int, float*, ptrdiff_t);

template <int V, int RS, size_t... I>
constexpr std::array<TileFn, sizeof...(I)> tile_table(std::index_sequence<I...>) {
  return {&tile<int(I) + 1, V, RS>...};
}
template <int V, size_t... I>
constexpr std::array<WTileFn, sizeof...(I)> wtile_table(std::index_sequence<I...>) {
  return {&wtile<int(I) + 1, V>...};
}
// [pixel stride: runtime, 16, 32, 64][R - 1]
template <int V>
constexpr auto tile_tables() {
  constexpr auto seq = std::make_index_sequence<rmax(V)>();
  return std::array<std::array<TileFn, rmax(V)>, 4>{tile_table<V, 0>(seq), tile_table<V, 16>(seq),
                                                    tile_table<V, 32>(seq), tile_table<V, 64>(seq)};
}
constexpr auto kTile1 = tile_tables<1>();
constexpr auto kTile2 = tile_tables<2>();
constexpr auto kWTile1 = wtile_table<1>(std::make_index_sequence<kRmax1>());
constexpr auto kWTile2 = wtile_table<2>(std::make_index_sequence<kRmax2>());

TileFn tile_fn(int r, int v, ptrdiff_t rs) {
  const int i = rs == 16 ? 1 : rs == 32 ? 2 : rs == 64 ? 3 : 0;
  return v == 1 ? kTile1[i][r - 1] : kTile2[i][r - 1];
}
WTileFn wtile_fn(int r, int v) {
  return v == 1 ? kWTile1[r - 1] : kWTile2[r - 1];
}

#endif  // __AVX512F__

}  // namespace

bool direct_conv_supported(const ConvDims& d, ConvPass pass) {
#if defined(__AVX512F__)
  return tiles_fit(d, pass);
#else
  (void)d;
  (void)pass;
  return false;
#endif
}

size_t direct_conv_scratch_floats(const ConvDims& d) {
  return std::max(fwd_scratch(d), bwd_data_scratch(d)) + 16;
}

void direct_conv_forward(const ConvDims& d, const float* x, const float* w, float* y,
                         Arena& arena) {
  MLPD_CHECK(direct_conv_supported(d, ConvPass::forward), "direct conv: unsupported forward shape");
#if defined(__AVX512F__)
  ArenaScope scope(arena);
  const int oh_n = d.out_h(), ow_n = d.out_w(), ci = d.c_in, co = d.c_out, s = d.stride;
  const int hp = d.h + 2 * d.pad, wp = d.w + 2 * d.pad;
  float* xp = arena_floats(arena, size_t(hp) * wp * ci);
  std::memset(xp, 0, sizeof(float) * size_t(hp) * wp * ci);  // the border stays zero
  const int nt = d.k * d.k;
  int toff[kMaxTaps];
  const float* tw[kMaxTaps];
  for (int kh = 0; kh < d.k; ++kh)
    for (int kw = 0; kw < d.k; ++kw) toff[kh * d.k + kw] = (kh * wp + kw) * ci;
  const int v = pick_v(co);
  for (int n = 0; n < d.n; ++n) {
    const float* xn = x + size_t(n) * d.h * d.w * ci;
    for (int ih = 0; ih < d.h; ++ih)
      std::memcpy(xp + (size_t(ih + d.pad) * wp + d.pad) * ci, xn + size_t(ih) * d.w * ci,
                  sizeof(float) * size_t(d.w) * ci);
    for (int co0 = 0; co0 < co; co0 += 16 * v) {
      for (int t = 0; t < nt; ++t) tw[t] = w + size_t(t) * ci * co + co0;
      for (int oh = 0; oh < oh_n; ++oh) {
        const float* in_row = xp + size_t(oh) * s * wp * ci;
        float* out_row = y + (size_t(n) * oh_n + oh) * ow_n * co + co0;
        for_row_tiles(ow_n, v, [&](int b0, int len) {
          tile_fn(len, v, ptrdiff_t(s) * ci)(in_row + size_t(b0) * s * ci, ptrdiff_t(s) * ci, toff,
                                             tw, nt, ci, co, out_row + size_t(b0) * co, co, false);
        });
      }
    }
  }
#else
  (void)x, (void)w, (void)y, (void)arena;
#endif
}

// dx as the transposed convolution of dy, one parity class at a time (conv_direct_common.h).
void direct_conv_backward_data(const ConvDims& d, const float* dy, const float* w, float* dx,
                               Arena& arena, bool accumulate) {
  MLPD_CHECK(direct_conv_supported(d, ConvPass::backward_data),
             "direct conv: unsupported backward-data shape");
#if defined(__AVX512F__)
  ArenaScope scope(arena);
  const int oh_n = d.out_h(), ow_n = d.out_w(), ci = d.c_in, co = d.c_out, s = d.stride, k = d.k;
  const int bd = dy_border(d), ohp = oh_n + 2 * bd, owp = ow_n + 2 * bd;
  float* dyp = arena_floats(arena, size_t(ohp) * owp * co);
  std::memset(dyp, 0, sizeof(float) * size_t(ohp) * owp * co);
  float* wt = arena_floats(arena, size_t(k) * k * co * ci);  // [kh, kw, co, ci]
  for (int t = 0; t < k * k; ++t)
    for (int i = 0; i < ci; ++i)
      for (int o = 0; o < co; ++o)
        wt[(size_t(t) * co + o) * ci + i] = w[(size_t(t) * ci + i) * co + o];
  const int v = pick_v(ci);
  int toff[kMaxTaps];
  const float* tw[kMaxTaps];
  for (int n = 0; n < d.n; ++n) {
    const float* dyn = dy + size_t(n) * oh_n * ow_n * co;
    float* dxn = dx + size_t(n) * d.h * d.w * ci;
    for (int oh = 0; oh < oh_n; ++oh)
      std::memcpy(dyp + (size_t(oh + bd) * owp + bd) * co, dyn + size_t(oh) * ow_n * co,
                  sizeof(float) * size_t(ow_n) * co);
    for (int ph = 0; ph < s && ph < d.h; ++ph)
      for (int pw = 0; pw < s && pw < d.w; ++pw) {
        const ParityClass pc = parity_class(d, ph, pw);
        const int nt = pc.nt, rows = pc.rows, cols = pc.cols;
        for (int t = 0; t < nt; ++t) toff[t] = (pc.dh[t] * owp + pc.dw[t]) * co;
        if (nt == 0) {  // s > k
          if (!accumulate) zero_parity_class(d, pc, ph, pw, dxn);
          continue;
        }
        for (int ci0 = 0; ci0 < ci; ci0 += 16 * v) {
          for (int t = 0; t < nt; ++t) tw[t] = wt + size_t(pc.tap[t]) * co * ci + ci0;
          for (int a = 0; a < rows; ++a) {
            const float* in_row = dyp + (size_t(a + bd) * owp + bd) * co;
            float* out_row = dxn + (size_t(s * a + ph) * d.w + pw) * ci + ci0;
            for_row_tiles(cols, v, [&](int b0, int len) {
              tile_fn(len, v, co)(in_row + size_t(b0) * co, co, toff, tw, nt, co, ci,
                              out_row + size_t(b0) * s * ci, ptrdiff_t(s) * ci, accumulate);
            });
          }
        }
      }
  }
#else
  (void)dy, (void)w, (void)dx, (void)arena, (void)accumulate;
#endif
}

void direct_conv_backward_weights(const ConvDims& d, const float* x, const float* dy, float* dw,
                                  Arena& arena) {
  MLPD_CHECK(direct_conv_supported(d, ConvPass::backward_weights),
             "direct conv: unsupported backward-weights shape");
#if defined(__AVX512F__)
  const int oh_n = d.out_h(), ow_n = d.out_w(), ci = d.c_in, co = d.c_out, s = d.stride, k = d.k;
  const int v = pick_v(co);
  if (ci == 1 && k == 3) {  // the stem: taps as tile rows, over a zero-padded image
    ArenaScope scope(arena);
    const int hp = d.h + 2 * d.pad, wp = d.w + 2 * d.pad;
    float* xp = arena_floats(arena, size_t(hp) * wp);
    std::memset(xp, 0, sizeof(float) * size_t(hp) * wp);
    for (int n = 0; n < d.n; ++n) {
      const float* xn = x + size_t(n) * d.h * d.w;
      for (int ih = 0; ih < d.h; ++ih)
        std::memcpy(xp + size_t(ih + d.pad) * wp + d.pad, xn + size_t(ih) * d.w,
                    sizeof(float) * d.w);
      const float* dyn = dy + size_t(n) * oh_n * ow_n * co;
      for (int co0 = 0; co0 < co; co0 += 16 * v)
        (v == 1 ? wtile_c1k3<1> : wtile_c1k3<2>)(xp, wp, s, dyn + co0, co, oh_n, ow_n, dw + co0,
                                                 co);
    }
    return;
  }
  // c_in rows per tile: the largest divisor of c_in that fits the register budget.
  int r = std::min(ci, v == 1 ? 16 : 8);  // 16 accumulators
  while (ci % r != 0) --r;
  for (int n = 0; n < d.n; ++n) {
    const float* xn = x + size_t(n) * d.h * d.w * ci;
    const float* dyn = dy + size_t(n) * oh_n * ow_n * co;
    for (int kh = 0; kh < k; ++kh) {
      // oh with 0 <= oh*s - p + kh < h
      const int oh0 = std::max(0, ceil_div(d.pad - kh, s));
      const int oh1 = std::min(oh_n, floor_div(d.h - 1 + d.pad - kh, s) + 1);
      if (oh0 >= oh1) continue;
      for (int kw = 0; kw < k; ++kw) {
        const int ow0 = std::max(0, ceil_div(d.pad - kw, s));
        const int ow1 = std::min(ow_n, floor_div(d.w - 1 + d.pad - kw, s) + 1);
        if (ow0 >= ow1) continue;
        const float* xb =
            xn + (size_t(oh0 * s - d.pad + kh) * d.w + (ow0 * s - d.pad + kw)) * ci;
        const float* gb = dyn + (size_t(oh0) * ow_n + ow0) * co;
        float* wb = dw + size_t(kh * k + kw) * ci * co;
        for (int ci0 = 0; ci0 < ci; ci0 += r)
          for (int co0 = 0; co0 < co; co0 += 16 * v)
            wtile_fn(r, v)(xb + ci0, ptrdiff_t(s) * d.w * ci, ptrdiff_t(s) * ci, gb + co0,
                           ptrdiff_t(ow_n) * co, co, oh1 - oh0, ow1 - ow0,
                           wb + size_t(ci0) * co + co0, co);
      }
    }
  }
#else
  (void)x, (void)dy, (void)dw, (void)arena;
#endif
}

}  // namespace mlpd
