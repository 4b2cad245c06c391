// gemm_bf16 on the CPU (kernels/op_signatures.inc; the two paths: kernels/cpu/gemm_bf16.h).
//
// The native kernel is the classic packed GEMM: a block of B (kKc rows of k, all n columns) and
// a block of A (kMc rows, the same k) are repacked so that the micro-kernel reads both with unit
// stride, then each 14x32 tile of C is one micro-kernel call that keeps its tile in 28 zmm
// registers over the whole k block. vdpbf16ps sums two k steps at once, so both packed operands
// store k in pairs: one 32-bit word holds (k, k+1) of one row of A or one column of B, with a
// zero for the missing half of an odd k.
#include "kernels/cpu/gemm_bf16.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/bf16.h"
#include "kernels/ops.h"

#if defined(__AVX512BF16__) && defined(__AVX512F__)
#include <immintrin.h>
#define MLPD_GEMM_BF16_NATIVE 1
#endif

namespace mlpd {

namespace {

bool g_native_enabled = true;

// Scratch grown to the largest call and kept, per thread: steady-state steps never allocate.
template <class T>
T* grown(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// A [rows x cols] bf16 block read at leading dimension ld, as dense fp32 (exact).
float* widen_rows(const uint16_t* src, int rows, int cols, int ld, std::vector<float>& dst) {
  float* out = grown(dst, size_t(rows) * size_t(cols));
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < cols; ++j) out[size_t(r) * cols + j] = bf16_to_f32(src[size_t(r) * ld + j]);
  return out;
}

void gemm_bf16_widen(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const uint16_t* a, int lda,
                     const uint16_t* b, int ldb, float beta, float* c, int ldc) {
  thread_local std::vector<float> a32, b32;
  const int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
  const int b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
  const float* aw = widen_rows(a, a_rows, a_cols, lda, a32);
  const float* bw = widen_rows(b, b_rows, b_cols, ldb, b32);
  gemm(trans_a, trans_b, m, n, k, alpha, aw, a_cols, bw, b_cols, beta, c, ldc);
}

#ifdef MLPD_GEMM_BF16_NATIVE

constexpr int kMr = 14;   // rows of a C tile: 14 x 2 accumulators + 2 B vectors + 1 broadcast <= 32 zmm
constexpr int kNr = 32;   // columns of a C tile: two zmm of fp32
constexpr int kKc = 384;  // k per block (even): a 32-column B panel is 24 KiB, within L1
constexpr int kMc = 252;  // rows of A per block (18 tiles): 189 KiB packed, within L2

inline uint32_t pair(uint16_t lo, uint16_t hi) { return uint32_t(lo) | (uint32_t(hi) << 16); }
inline uint32_t load_pair(const uint16_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);  // little-endian: p[0] low, p[1] high
  return v;
}

// Lines line0..line0+count of an operand (rows of op(A), or columns of op(B)), k from pc to pc+kc,
// as panels of `width` lines: panel[p * width + i] holds line line0 + i at k = pc + 2p and pc + 2p + 1.
// Lines past count are zero. k_contiguous: a line's k values are contiguous in src (line l at
// src + l * ld: A, or a transposed B); else a k step is a row of src (k at src + k * ld, the lines
// side by side: a transposed A, or B).
void pack_panels(const uint16_t* src, int ld, bool k_contiguous, int line0, int count, int pc, int kc, int width,
                 uint32_t* packed) {
  const int kp = (kc + 1) / 2, full = kc / 2;
  for (int i0 = 0; i0 < count; i0 += width) {
    uint32_t* panel = packed + size_t(i0 / width) * kp * width;
    const int lines = std::min(width, count - i0);
    if (k_contiguous) {  // a pair is one 32-bit load along the line
      for (int i = 0; i < width; ++i) {
        if (i >= lines) {
          for (int p = 0; p < kp; ++p) panel[size_t(p) * width + i] = 0;
          continue;
        }
        const uint16_t* line = src + size_t(line0 + i0 + i) * ld + pc;
        for (int p = 0; p < full; ++p) panel[size_t(p) * width + i] = load_pair(line + 2 * p);
        if (full < kp) panel[size_t(full) * width + i] = pair(line[2 * full], 0);
      }
    } else {  // interleave two rows of src
      for (int p = 0; p < kp; ++p) {
        uint32_t* dst = panel + size_t(p) * width;
        const uint16_t* r0 = src + size_t(pc + 2 * p) * ld + line0 + i0;
        if (p < full) {
          const uint16_t* r1 = r0 + ld;
          for (int i = 0; i < lines; ++i) dst[i] = pair(r0[i], r1[i]);
        } else {
          for (int i = 0; i < lines; ++i) dst[i] = pair(r0[i], 0);
        }
        for (int i = lines; i < width; ++i) dst[i] = 0;
      }
    }
  }
}

// One C tile (mr <= kMr rows, nr <= kNr columns) over kp packed k pairs. The first k block
// scales by alpha and adds beta * C (C unread when beta is 0); later blocks add alpha * AB.
void micro_kernel(int kp, const uint32_t* ap, const uint32_t* bp, float* c, int ldc, int mr, int nr, float alpha,
                  bool first_block, float beta) {
  __m512 acc[kMr][2];
  for (int i = 0; i < kMr; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int p = 0; p < kp; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp + size_t(p) * kNr);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + size_t(p) * kNr + 16);
    const uint32_t* a_pairs = ap + size_t(p) * kMr;
#pragma GCC unroll 14
    for (int i = 0; i < kMr; ++i) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a_pairs[i]));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], av, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], av, b1);
    }
  }
  const __mmask16 m0 = nr >= 16 ? __mmask16(0xffff) : __mmask16((1u << nr) - 1);
  const __mmask16 m1 = nr >= 32 ? __mmask16(0xffff) : nr > 16 ? __mmask16((1u << (nr - 16)) - 1) : __mmask16(0);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int i = 0; i < mr; ++i) {
    float* row = c + size_t(i) * ldc;
    __m512 r0 = _mm512_mul_ps(acc[i][0], va), r1 = _mm512_mul_ps(acc[i][1], va);
    if (!first_block) {
      r0 = _mm512_add_ps(r0, _mm512_maskz_loadu_ps(m0, row));
      r1 = _mm512_add_ps(r1, _mm512_maskz_loadu_ps(m1, row + 16));
    } else if (beta != 0.0f) {
      r0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, row), r0);
      r1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, row + 16), r1);
    }
    _mm512_mask_storeu_ps(row, m0, r0);
    _mm512_mask_storeu_ps(row + 16, m1, r1);
  }
}

void gemm_bf16_native(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const uint16_t* a, int lda,
                      const uint16_t* b, int ldb, float beta, float* c, int ldc) {
  thread_local std::vector<uint32_t> a_packed, b_packed;
  const int n_panels = (n + kNr - 1) / kNr;
  const int kp_max = (std::min(k, kKc) + 1) / 2;
  uint32_t* bp = grown(b_packed, size_t(n_panels) * kNr * kp_max);
  uint32_t* ap = grown(a_packed, size_t((std::min(m, kMc) + kMr - 1) / kMr) * kMr * kp_max);
  for (int pc = 0; pc < k; pc += kKc) {
    const int kc = std::min(kKc, k - pc), kp = (kc + 1) / 2;
    pack_panels(b, ldb, trans_b, 0, n, pc, kc, kNr, bp);
    for (int ic = 0; ic < m; ic += kMc) {
      const int mc = std::min(kMc, m - ic);
      pack_panels(a, lda, !trans_a, ic, mc, pc, kc, kMr, ap);
      for (int jp = 0; jp < n_panels; ++jp) {
        const int col = jp * kNr, nr = std::min(kNr, n - col);
        for (int i0 = 0; i0 < mc; i0 += kMr) {
          micro_kernel(kp, ap + size_t(i0 / kMr) * kp * kMr, bp + size_t(jp) * kp * kNr,
                       c + size_t(ic + i0) * ldc + col, ldc, std::min(kMr, mc - i0), nr, alpha, pc == 0, beta);
        }
      }
    }
  }
}

#endif  // MLPD_GEMM_BF16_NATIVE

}  // namespace

bool gemm_bf16_native_available() {
#ifdef MLPD_GEMM_BF16_NATIVE
  return true;
#else
  return false;
#endif
}

void gemm_bf16_set_native_enabled(bool enabled) { g_native_enabled = enabled; }

const char* gemm_bf16_path_name() {
  return gemm_bf16_native_available() && g_native_enabled ? "avx512bf16" : "widen+openblas";
}

void gemm_bf16(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const uint16_t* a, int lda,
               const uint16_t* b, int ldb, float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {  // no products: the fp32 GEMM's exact C = beta * C, which reads neither operand
    gemm(trans_a, trans_b, m, n, 0, alpha, nullptr, 1, nullptr, 1, beta, c, ldc);
    return;
  }
#ifdef MLPD_GEMM_BF16_NATIVE
  if (g_native_enabled) {
    gemm_bf16_native(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
#endif
  gemm_bf16_widen(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace mlpd
