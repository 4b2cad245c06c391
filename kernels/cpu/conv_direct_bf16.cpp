// Direct NHWC convolution on bf16 operands with fp32 sums (AVX512-BF16): the CPU convolution of
// --precision bf16 (kernels/op_table_bf16.cpp), where conv_bf16_use_direct() picks it.
//
// The loops are conv_direct.cpp's (read that first); the reduction step differs. vdpbf16ps
// multiplies two pairs of bf16 values and adds both products into one fp32 lane, so each
// operand stores its reduction index in pairs: one 32-bit word holds the values at (i, i + 1),
// with a zero where an odd count leaves i + 1 out. Each step of a register tile therefore does
// two multiply-adds per lane where the fp32 tile does one.
//   forward:          reduced over c_in. The zero-padded image holds channel pairs; the weights
//                     are [tap][c_in / 2][c_out][2].
//   backward data:    reduced over c_out, per parity class (conv_direct_common.h). The
//                     zero-bordered dy holds channel pairs; the weights are
//                     [tap][c_out / 2][c_in][2].
//   backward weights: reduced over output pixels, in pairs of output rows (2m, 2m + 1). dy is
//                     repacked as [oh / 2][ow][c_out][2], and the zero-padded image as pairs of
//                     rows s apart, [ih][iw][c_in][2]: one packing serves every tap, since tap kh
//                     reads padded row oh * s + kh. The padding makes every tap's pixel range the
//                     whole output, so nothing is clipped.
// Operands are rounded to bf16 (nearest even) as they are packed, so the op takes fp32 inputs as
// the fp32 op does. bf16 products are exact in fp32: the sums equal a convolution of rounded
// operands up to their order (and vdpbf16ps reads denormal bf16 inputs as zero). What a pass
// overwrites (y; dx unless it accumulates) is rounded to bf16 in registers as it is stored, the
// bf16 table's contract, which saves the table a pass over the output; what it accumulates into
// (dw, dx when asked) stays fp32.
// All loops run in a fixed order: results are bit-identical run to run.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "core/bf16.h"
#include "core/check.h"
#include "kernels/cpu/conv_direct_common.h"
#include "kernels/cpu/conv_paths.h"

#if defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>
#define MLPD_CONV_BF16_NATIVE 1
#endif

namespace mlpd {

namespace {

using namespace direct_conv;

int pairs(int n) { return (n + 1) / 2; }

size_t fwd_words(const ConvDims& d) {
  return size_t(d.h + 2 * d.pad) * (d.w + 2 * d.pad) * pairs(d.c_in) + 32 +
         size_t(d.k) * d.k * pairs(d.c_in) * d.c_out + 32;
}
size_t bwd_data_words(const ConvDims& d) {
  const int b = dy_border(d);
  return size_t(d.out_h() + 2 * b) * (d.out_w() + 2 * b) * pairs(d.c_out) + 32 +
         size_t(d.k) * d.k * pairs(d.c_out) * d.c_in + 32;
}
size_t bwd_weights_words(const ConvDims& d) {
  return size_t(d.h + 2 * d.pad) * (d.w + 2 * d.pad) * d.c_in + 32 +
         size_t(pairs(d.out_h())) * d.out_w() * d.c_out + 32;
}

#ifdef MLPD_CONV_BF16_NATIVE

// Scratch in 4-byte words (pairs of bf16), carved from the float arena.
uint32_t* arena_pairs(Arena& arena, size_t words) {
  return reinterpret_cast<uint32_t*>(arena_floats(arena, words));
}
uint16_t* halves(uint32_t* p) { return reinterpret_cast<uint16_t*>(p); }

// dst[i] = bf16(src[i]) for i < n, 16 at a time.
void to_bf16(const float* src, size_t n, uint16_t* dst) {
  for (size_t i = 0; i < n; i += 16) {
    const size_t len = std::min<size_t>(16, n - i);
    const __mmask16 m = len == 16 ? __mmask16(0xffff) : __mmask16((1u << len) - 1);
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + i));
    _mm256_mask_storeu_epi16(dst + i, m, reinterpret_cast<const __m256i&>(h));
  }
}

// dst[2i] = bf16(a[i]), dst[2i + 1] = bf16(b[i]) for i < n: two rows as one row of pairs. A null
// row reads as zeros.
void interleave_bf16(const float* a, const float* b, int n, uint16_t* dst) {
  alignas(64) static constexpr uint16_t kIdx[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,
                                                    21, 6, 22, 7, 23, 8,  24, 9,  25, 10, 26,
                                                    11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i idx = _mm512_load_si512(kIdx);
  for (int i = 0; i < n; i += 16) {
    const int len = std::min(16, n - i);
    const __mmask16 m = len == 16 ? __mmask16(0xffff) : __mmask16((1u << len) - 1);
    const __m512 va = a ? _mm512_maskz_loadu_ps(m, a + i) : _mm512_setzero_ps();
    const __m512 vb = b ? _mm512_maskz_loadu_ps(m, b + i) : _mm512_setzero_ps();
    const __m512bh both = _mm512_cvtne2ps_pbh(vb, va);  // words 0-15 from a, 16-31 from b
    const __m512i paired = _mm512_permutexvar_epi16(idx, reinterpret_cast<const __m512i&>(both));
    const __mmask32 m2 = len == 16 ? __mmask32(0xffffffffu) : __mmask32((1u << (2 * len)) - 1);
    _mm512_mask_storeu_epi16(dst + 2 * i, m2, paired);
  }
}

// `npix` pixels of c fp32 channels as pixels of pairs(c) words (an odd c's last pair is completed
// by the zero already in dst).
void pixels_to_pairs(const float* src, size_t npix, int c, uint32_t* dst) {
  if (c % 2 == 0) return to_bf16(src, npix * c, halves(dst));
  for (size_t p = 0; p < npix; ++p) to_bf16(src + p * c, c, halves(dst + p * pairs(c)));
}

// The same two from bf16 bits (an activation kept as bf16), copied as they are: they are already
// the values the fp32 helpers round to (bf16 inputs a table widened and rounded back are unchanged).
void interleave_bf16(const uint16_t* a, const uint16_t* b, int n, uint16_t* dst) {
  alignas(64) static constexpr uint16_t kIdx[32] = {0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,
                                                    37, 6, 38, 7, 39, 8,  40, 9,  41, 10, 42,
                                                    11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  const __m512i idx = _mm512_load_si512(kIdx);
  for (int i = 0; i < n; i += 16) {
    const int len = std::min(16, n - i);
    const __mmask32 m = __mmask32((1u << len) - 1);
    const __m512i va = a ? _mm512_maskz_loadu_epi16(m, a + i) : _mm512_setzero_si512();
    const __m512i vb = b ? _mm512_maskz_loadu_epi16(m, b + i) : _mm512_setzero_si512();
    const __m512i paired = _mm512_permutex2var_epi16(va, idx, vb);  // a[j] at 2j, b[j] at 2j + 1
    const __mmask32 m2 = len == 16 ? __mmask32(0xffffffffu) : __mmask32((1u << (2 * len)) - 1);
    _mm512_mask_storeu_epi16(dst + 2 * i, m2, paired);
  }
}

void pixels_to_pairs(const uint16_t* src, size_t npix, int c, uint32_t* dst) {
  if (c % 2 == 0) return (void)std::memcpy(dst, src, sizeof(uint16_t) * npix * c);
  for (size_t p = 0; p < npix; ++p) std::memcpy(dst + p * pairs(c), src + p * c, sizeof(uint16_t) * c);
}

__m512bh as_bh(__m512i v) { return reinterpret_cast<const __m512bh&>(v); }

// Each lane as round_to_bf16 (core/bf16.h) gives it, bit for bit: to nearest, ties to even, a NaN
// kept quiet. Written with GCC's vector extensions (g++ 12 warns falsely on the intrinsics' shifts).
using U32x16 = uint32_t __attribute__((vector_size(64)));
__m512 rounded_lanes(__m512 v) {
  const U32x16 u = (U32x16)v;
  const U32x16 nearest = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  const U32x16 quiet_nan = (u | 0x400000u) & 0xffff0000u;
  const U32x16 is_nan = (U32x16)((u & 0x7fffffffu) > 0x7f800000u);  // all ones where NaN
  return (__m512)((is_nan & quiet_nan) | (~is_nan & nearest));
}

// out[r * ors + 16v + j] (+)= sum_t sum_c in[toff[t] + r * rs + c] . tw[t][c * ldw + 32v + 2j ..]
// where `.` is vdpbf16ps's dot product of a channel pair; rounded to bf16 where it overwrites.
// RS > 0 fixes the pixel stride at compile time (see conv_direct.cpp's tile).
template <int R, int V, int RS>
void tile(const uint32_t* __restrict in, ptrdiff_t rs_runtime, const int* __restrict toff,
          const uint16_t* const* __restrict tw, int nt, int nc, ptrdiff_t ldw, float* __restrict out,
          ptrdiff_t ors, bool accumulate) {
  const ptrdiff_t rs = RS > 0 ? RS : rs_runtime;
  __m512 acc[R][V];
#pragma GCC unroll 32
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      acc[r][v] = accumulate ? _mm512_loadu_ps(out + r * ors + 16 * v) : _mm512_setzero_ps();
  for (int t = 0; t < nt; ++t) {
    const uint32_t* ip = in + toff[t];
    const uint16_t* wp = tw[t];
    for (int c = 0; c < nc; ++c) {
      __m512bh wv[V];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) wv[v] = as_bh(_mm512_loadu_si512(wp + c * ldw + 32 * v));
#pragma GCC unroll 32
      for (int r = 0; r < R; ++r) {
        const __m512bh b = as_bh(_mm512_set1_epi32(int(ip[r * rs + c])));
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], b, wv[v]);
      }
    }
  }
#pragma GCC unroll 32
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      _mm512_storeu_ps(out + r * ors + 16 * v, accumulate ? acc[r][v] : rounded_lanes(acc[r][v]));
}

// dw[r * ldw + 16v + j] += sum_{i < rows, q < cols} x[i * xrow + q * xs + r] . dy[i * dyrow +
// q * ldy + 32v + 2j ..], each `.` a pixel pair.
template <int R, int V>
void wtile(const uint32_t* __restrict x, ptrdiff_t xrow, ptrdiff_t xs, const uint16_t* __restrict dy,
           ptrdiff_t dyrow, ptrdiff_t ldy, int rows, int cols, float* __restrict dw, ptrdiff_t ldw) {
  __m512 acc[R][V];
#pragma GCC unroll 32
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int i = 0; i < rows; ++i) {
    const uint32_t* xp = x + i * xrow;
    const uint16_t* gp = dy + i * dyrow;
    for (int q = 0; q < cols; ++q, xp += xs, gp += ldy) {
      __m512bh g[V];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) g[v] = as_bh(_mm512_loadu_si512(gp + 32 * v));
#pragma GCC unroll 32
      for (int r = 0; r < R; ++r) {
        const __m512bh b = as_bh(_mm512_set1_epi32(int(xp[r])));
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], b, g[v]);
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

using TileFn = void (*)(const uint32_t*, ptrdiff_t, const int*, const uint16_t* const*, int, int,
                        ptrdiff_t, float*, ptrdiff_t, bool);
using WTileFn = void (*)(const uint32_t*, ptrdiff_t, ptrdiff_t, const uint16_t*, ptrdiff_t, ptrdiff_t,
                         int, int, float*, ptrdiff_t);

template <int V, int RS, size_t... I>
constexpr std::array<TileFn, sizeof...(I)> tile_table(std::index_sequence<I...>) {
  return {&tile<int(I) + 1, V, RS>...};
}
template <int V, size_t... I>
constexpr std::array<WTileFn, sizeof...(I)> wtile_table(std::index_sequence<I...>) {
  return {&wtile<int(I) + 1, V>...};
}
// [pixel stride in words: runtime, 8, 16, 32][R - 1]: 16, 32 and 64 channels at stride 1, 16 and
// 32 at stride 2.
template <int V>
constexpr auto tile_tables() {
  constexpr auto seq = std::make_index_sequence<rmax(V)>();
  return std::array<std::array<TileFn, rmax(V)>, 4>{tile_table<V, 0>(seq), tile_table<V, 8>(seq),
                                                    tile_table<V, 16>(seq), tile_table<V, 32>(seq)};
}
constexpr auto kTile1 = tile_tables<1>();
constexpr auto kTile2 = tile_tables<2>();
constexpr auto kWTile1 = wtile_table<1>(std::make_index_sequence<kRmax1>());
constexpr auto kWTile2 = wtile_table<2>(std::make_index_sequence<kRmax2>());

TileFn tile_fn(int r, int v, ptrdiff_t rs) {
  const int i = rs == 8 ? 1 : rs == 16 ? 2 : rs == 32 ? 3 : 0;
  return v == 1 ? kTile1[i][r - 1] : kTile2[i][r - 1];
}
WTileFn wtile_fn(int r, int v) { return v == 1 ? kWTile1[r - 1] : kWTile2[r - 1]; }

#endif  // MLPD_CONV_BF16_NATIVE

}  // namespace

bool direct_conv_bf16_available() {
#ifdef MLPD_CONV_BF16_NATIVE
  return true;
#else
  return false;
#endif
}

bool direct_conv_bf16_supported(const ConvDims& d, ConvPass pass) {
#ifdef MLPD_CONV_BF16_NATIVE
  return tiles_fit(d, pass);
#else
  (void)d;
  (void)pass;
  return false;
#endif
}

size_t direct_conv_bf16_scratch_floats(const ConvDims& d) {
  return std::max({fwd_words(d), bwd_data_words(d), bwd_weights_words(d)}) + 16;
}

namespace {

template <class X>
void forward_pass(const ConvDims& d, const X* x, const float* w, float* y, Arena& arena) {
  MLPD_CHECK(direct_conv_bf16_supported(d, ConvPass::forward), "bf16 direct conv: unsupported forward shape");
#ifdef MLPD_CONV_BF16_NATIVE
  ArenaScope scope(arena);
  const int oh_n = d.out_h(), ow_n = d.out_w(), ci = d.c_in, cp = pairs(ci), co = d.c_out, s = d.stride;
  const int hp = d.h + 2 * d.pad, wp = d.w + 2 * d.pad, nt = d.k * d.k;
  uint32_t* xp = arena_pairs(arena, size_t(hp) * wp * cp);
  std::memset(xp, 0, sizeof(uint32_t) * size_t(hp) * wp * cp);  // the border stays zero
  uint16_t* wpk = halves(arena_pairs(arena, size_t(nt) * cp * co));  // [tap][c_in / 2][c_out][2]
  for (int t = 0; t < nt; ++t)
    for (int c2 = 0; c2 < cp; ++c2) {
      const float* even = w + (size_t(t) * ci + 2 * c2) * co;
      interleave_bf16(even, 2 * c2 + 1 < ci ? even + co : nullptr, co, wpk + (size_t(t) * cp + c2) * co * 2);
    }
  int toff[kMaxTaps];
  const uint16_t* tw[kMaxTaps];
  for (int kh = 0; kh < d.k; ++kh)
    for (int kw = 0; kw < d.k; ++kw) toff[kh * d.k + kw] = (kh * wp + kw) * cp;
  const int v = pick_v(co);
  const ptrdiff_t rs = ptrdiff_t(s) * cp;
  for (int n = 0; n < d.n; ++n) {
    const X* xn = x + size_t(n) * d.h * d.w * ci;
    for (int ih = 0; ih < d.h; ++ih)
      pixels_to_pairs(xn + size_t(ih) * d.w * ci, d.w, ci, xp + (size_t(ih + d.pad) * wp + d.pad) * cp);
    for (int co0 = 0; co0 < co; co0 += 16 * v) {
      for (int t = 0; t < nt; ++t) tw[t] = wpk + (size_t(t) * cp * co + co0) * 2;
      for (int oh = 0; oh < oh_n; ++oh) {
        const uint32_t* in_row = xp + size_t(oh) * s * wp * cp;
        float* out_row = y + (size_t(n) * oh_n + oh) * ow_n * co + co0;
        for_row_tiles(ow_n, v, [&](int b0, int len) {
          tile_fn(len, v, rs)(in_row + b0 * rs, rs, toff, tw, nt, cp, 2 * co, out_row + size_t(b0) * co, co,
                              false);
        });
      }
    }
  }
#else
  (void)x, (void)w, (void)y, (void)arena;
#endif
}

template <class DY>
void backward_data_pass(const ConvDims& d, const DY* dy, const float* w, float* dx, Arena& arena,
                                    bool accumulate) {
  MLPD_CHECK(direct_conv_bf16_supported(d, ConvPass::backward_data),
             "bf16 direct conv: unsupported backward-data shape");
#ifdef MLPD_CONV_BF16_NATIVE
  ArenaScope scope(arena);
  const int oh_n = d.out_h(), ow_n = d.out_w(), ci = d.c_in, co = d.c_out, cp = pairs(co), s = d.stride;
  const int nt_all = d.k * d.k, bd = dy_border(d), ohp = oh_n + 2 * bd, owp = ow_n + 2 * bd;
  uint32_t* dyp = arena_pairs(arena, size_t(ohp) * owp * cp);
  std::memset(dyp, 0, sizeof(uint32_t) * size_t(ohp) * owp * cp);
  uint16_t* wt = halves(arena_pairs(arena, size_t(nt_all) * cp * ci));  // [tap][c_out / 2][c_in][2]
  for (int t = 0; t < nt_all; ++t)
    for (int c2 = 0; c2 < cp; ++c2)
      for (int i = 0; i < ci; ++i)
        for (int h = 0; h < 2; ++h) {
          const int o = 2 * c2 + h;
          wt[((size_t(t) * cp + c2) * ci + i) * 2 + h] = o < co ? f32_to_bf16(w[(size_t(t) * ci + i) * co + o]) : 0;
        }
  const int v = pick_v(ci);
  int toff[kMaxTaps];
  const uint16_t* tw[kMaxTaps];
  for (int n = 0; n < d.n; ++n) {
    const DY* dyn = dy + size_t(n) * oh_n * ow_n * co;
    float* dxn = dx + size_t(n) * d.h * d.w * ci;
    for (int oh = 0; oh < oh_n; ++oh)
      pixels_to_pairs(dyn + size_t(oh) * ow_n * co, ow_n, co, dyp + (size_t(oh + bd) * owp + bd) * cp);
    for (int ph = 0; ph < s && ph < d.h; ++ph)
      for (int pw = 0; pw < s && pw < d.w; ++pw) {
        const ParityClass pc = parity_class(d, ph, pw);
        if (pc.nt == 0) {  // s > k
          if (!accumulate) zero_parity_class(d, pc, ph, pw, dxn);
          continue;
        }
        for (int t = 0; t < pc.nt; ++t) toff[t] = (pc.dh[t] * owp + pc.dw[t]) * cp;
        for (int ci0 = 0; ci0 < ci; ci0 += 16 * v) {
          for (int t = 0; t < pc.nt; ++t) tw[t] = wt + (size_t(pc.tap[t]) * cp * ci + ci0) * 2;
          for (int a = 0; a < pc.rows; ++a) {
            const uint32_t* in_row = dyp + (size_t(a + bd) * owp + bd) * cp;
            float* out_row = dxn + (size_t(s * a + ph) * d.w + pw) * ci + ci0;
            for_row_tiles(pc.cols, v, [&](int b0, int len) {
              tile_fn(len, v, cp)(in_row + size_t(b0) * cp, cp, toff, tw, pc.nt, cp, 2 * ci,
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

template <class X, class DY>
void backward_weights_pass(const ConvDims& d, const X* x, const DY* dy, float* dw,
                                       Arena& arena) {
  MLPD_CHECK(direct_conv_bf16_supported(d, ConvPass::backward_weights),
             "bf16 direct conv: unsupported backward-weights shape");
#ifdef MLPD_CONV_BF16_NATIVE
  ArenaScope scope(arena);
  const int oh_n = d.out_h(), ow_n = d.out_w(), ohq = pairs(oh_n), ci = d.c_in, co = d.c_out, s = d.stride;
  const int k = d.k, hp = d.h + 2 * d.pad, wp = d.w + 2 * d.pad;
  // xk[ih][iw][c] = (x at padded (ih, iw), x at padded (ih + s, iw)): the inputs of output rows 2m
  // and 2m + 1 for every tap, since tap kh reads padded row oh * s + kh.
  uint32_t* xk = arena_pairs(arena, size_t(hp) * wp * ci);
  std::memset(xk, 0, sizeof(uint32_t) * size_t(hp) * wp * ci);  // the padding columns stay zero
  uint16_t* dyk = halves(arena_pairs(arena, size_t(ohq) * ow_n * co));  // [oh / 2][ow][c_out][2]
  const int v = pick_v(co);
  // c_in rows per tile: the largest divisor of c_in that fits the register budget.
  int r = std::min(ci, v == 1 ? 16 : 8);
  while (ci % r != 0) --r;
  auto x_row = [&](const X* xn, int ih) -> const X* {  // padded row ih, or null in the padding
    const int row = ih - d.pad;
    return row >= 0 && row < d.h ? xn + size_t(row) * d.w * ci : nullptr;
  };
  for (int n = 0; n < d.n; ++n) {
    const X* xn = x + size_t(n) * d.h * d.w * ci;
    const DY* dyn = dy + size_t(n) * oh_n * ow_n * co;
    for (int ih = 0; ih < hp; ++ih) {
      if (ih % (2 * s) >= k) continue;  // no tap starts a row pair here (k < 2s: 1x1 stride 2)
      interleave_bf16(x_row(xn, ih), x_row(xn, ih + s), d.w * ci, halves(xk + (size_t(ih) * wp + d.pad) * ci));
    }
    for (int m = 0; m < ohq; ++m) {
      const DY* even = dyn + size_t(2 * m) * ow_n * co;
      interleave_bf16(even, 2 * m + 1 < oh_n ? even + size_t(ow_n) * co : nullptr, ow_n * co,
                      dyk + size_t(m) * ow_n * co * 2);
    }
    for (int kh = 0; kh < k; ++kh)
      for (int kw = 0; kw < k; ++kw) {
        const uint32_t* xb = xk + (size_t(kh) * wp + kw) * ci;
        float* wb = dw + size_t(kh * k + kw) * ci * co;
        for (int ci0 = 0; ci0 < ci; ci0 += r)
          for (int co0 = 0; co0 < co; co0 += 16 * v)
            wtile_fn(r, v)(xb + ci0, ptrdiff_t(2) * s * wp * ci, ptrdiff_t(s) * ci, dyk + size_t(co0) * 2,
                           ptrdiff_t(ow_n) * co * 2, ptrdiff_t(co) * 2, ohq, ow_n, wb + size_t(ci0) * co + co0, co);
      }
  }
#else
  (void)x, (void)dy, (void)dw, (void)arena;
#endif
}

}  // namespace

void direct_conv_bf16_forward(const ConvDims& d, const float* x, const float* w, float* y, Arena& arena) {
  forward_pass(d, x, w, y, arena);
}
void direct_conv_bf16_forward(const ConvDims& d, const uint16_t* x, const float* w, float* y, Arena& arena) {
  forward_pass(d, x, w, y, arena);
}
void direct_conv_bf16_backward_data(const ConvDims& d, const float* dy, const float* w, float* dx, Arena& arena,
                                    bool accumulate) {
  backward_data_pass(d, dy, w, dx, arena, accumulate);
}
void direct_conv_bf16_backward_data(const ConvDims& d, const uint16_t* dy, const float* w, float* dx, Arena& arena,
                                    bool accumulate) {
  backward_data_pass(d, dy, w, dx, arena, accumulate);
}
void direct_conv_bf16_backward_weights(const ConvDims& d, const float* x, const float* dy, float* dw,
                                       Arena& arena) {
  backward_weights_pass(d, x, dy, dw, arena);
}
void direct_conv_bf16_backward_weights(const ConvDims& d, const uint16_t* x, const float* dy, float* dw,
                                       Arena& arena) {
  backward_weights_pass(d, x, dy, dw, arena);
}
void direct_conv_bf16_backward_weights(const ConvDims& d, const float* x, const uint16_t* dy, float* dw,
                                       Arena& arena) {
  backward_weights_pass(d, x, dy, dw, arena);
}

}  // namespace mlpd
