// Batch norm over [rows, c] (NHWC flattened). Statistics are accumulated per channel in float
// over blocks of rows, then folded into double, so long reductions stay accurate and the inner
// loops (over contiguous channels) vectorise.
// With AVX-512 and c a multiple of 16, the row loops keep up to 64 channels of block sums in
// registers (the scalar loops round-trip them through memory every row); the summation order
// per channel is the same (rows in order within a block of 64, blocks folded into double).
#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/check.h"
#include "kernels/ops.h"

namespace mlpd {

namespace {
constexpr int64_t kBlockRows = 64;
constexpr int kMaxC = 4096;  // per-channel scratch on the stack (ResNet-50 tops out at 2048)

inline void apply(const float* x, int64_t rows, int c, const float* scale, const float* shift,
                  float* y, const float* residual, bool relu) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * c;
    float* yr = y + r * c;
    if (residual) {
      const float* rr = residual + r * c;
      if (relu) {
        for (int j = 0; j < c; ++j) yr[j] = std::max(0.0f, xr[j] * scale[j] + shift[j] + rr[j]);
      } else {
        for (int j = 0; j < c; ++j) yr[j] = xr[j] * scale[j] + shift[j] + rr[j];
      }
    } else if (relu) {
      for (int j = 0; j < c; ++j) yr[j] = std::max(0.0f, xr[j] * scale[j] + shift[j]);
    } else {
      for (int j = 0; j < c; ++j) yr[j] = xr[j] * scale[j] + shift[j];
    }
  }
}
#if defined(__AVX512F__)
// Adds 16 float block sums into doubles (once per block of rows; through memory because GCC 12
// warns on the float->double conversion intrinsics' undefined upper halves).
inline void fold_into(double* dst, __m512 v) {
  alignas(64) float f[16];
  _mm512_store_ps(f, v);
  for (int j = 0; j < 16; ++j) dst[j] += double(f[j]);
}

// Forward statistics for channels [0, 16*V) of rows with stride c: sum += x, sq += x*x.
template <int V>
void stats_sums(const float* x, int64_t rows, int c, double* sum, double* sq) {
  for (int64_t r0 = 0; r0 < rows; r0 += kBlockRows) {
    const int64_t r1 = std::min(rows, r0 + kBlockRows);
    __m512 s[V], q[V];
    for (int v = 0; v < V; ++v) s[v] = q[v] = _mm512_setzero_ps();
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * c;
      for (int v = 0; v < V; ++v) {
        const __m512 xv = _mm512_loadu_ps(xr + 16 * v);
        s[v] = _mm512_add_ps(s[v], xv);
        q[v] = _mm512_add_ps(q[v], _mm512_mul_ps(xv, xv));
      }
    }
    for (int v = 0; v < V; ++v) {
      fold_into(sum + 16 * v, s[v]);
      fold_into(sq + 16 * v, q[v]);
    }
  }
}

void stats_sums_avx512(int nv, const float* x, int64_t rows, int c, double* sum, double* sq) {
  switch (nv) {
    case 1: return stats_sums<1>(x, rows, c, sum, sq);
    case 2: return stats_sums<2>(x, rows, c, sum, sq);
    case 3: return stats_sums<3>(x, rows, c, sum, sq);
    default: return stats_sums<4>(x, rows, c, sum, sq);
  }
}

inline __m512 masked_grad(const float* dr, const float* yr) {
  const __m512 g = _mm512_loadu_ps(dr);
  if (!yr) return g;
  const __mmask16 pos = _mm512_cmp_ps_mask(_mm512_loadu_ps(yr), _mm512_setzero_ps(), _CMP_GT_OQ);
  return _mm512_maskz_mov_ps(pos, g);
}

// Backward pass 1: sdy += g, sdyx += g * (x - mean), g = dy masked by y > 0 when y is given.
template <int V>
void grad_sums(const float* x, const float* dy, const float* y, const float* mean, int64_t rows,
               int c, double* sdy, double* sdyx) {
  __m512 m[V];
  for (int v = 0; v < V; ++v) m[v] = _mm512_loadu_ps(mean + 16 * v);
  for (int64_t r0 = 0; r0 < rows; r0 += kBlockRows) {
    const int64_t r1 = std::min(rows, r0 + kBlockRows);
    __m512 s[V], q[V];
    for (int v = 0; v < V; ++v) s[v] = q[v] = _mm512_setzero_ps();
    for (int64_t r = r0; r < r1; ++r) {
      for (int v = 0; v < V; ++v) {
        const size_t o = size_t(r) * c + 16 * v;
        const __m512 g = masked_grad(dy + o, y ? y + o : nullptr);
        s[v] = _mm512_add_ps(s[v], g);
        q[v] = _mm512_add_ps(q[v], _mm512_mul_ps(g, _mm512_sub_ps(_mm512_loadu_ps(x + o), m[v])));
      }
    }
    for (int v = 0; v < V; ++v) {
      fold_into(sdy + 16 * v, s[v]);
      fold_into(sdyx + 16 * v, q[v]);
    }
  }
}

void grad_sums_avx512(int nv, const float* x, const float* dy, const float* y, const float* mean,
                      int64_t rows, int c, double* sdy, double* sdyx) {
  switch (nv) {
    case 1: return grad_sums<1>(x, dy, y, mean, rows, c, sdy, sdyx);
    case 2: return grad_sums<2>(x, dy, y, mean, rows, c, sdy, sdyx);
    case 3: return grad_sums<3>(x, dy, y, mean, rows, c, sdy, sdyx);
    default: return grad_sums<4>(x, dy, y, mean, rows, c, sdy, sdyx);
  }
}

// Backward pass 2: dx = a*g + b*x + k per channel.
template <int V>
void grad_apply(const float* x, const float* dy, const float* y, int64_t rows, int c,
                const float* ca, const float* cb, const float* ck, float* dx) {
  __m512 a[V], b[V], k[V];
  for (int v = 0; v < V; ++v) {
    a[v] = _mm512_loadu_ps(ca + 16 * v);
    b[v] = _mm512_loadu_ps(cb + 16 * v);
    k[v] = _mm512_loadu_ps(ck + 16 * v);
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int v = 0; v < V; ++v) {
      const size_t o = size_t(r) * c + 16 * v;
      const __m512 g = masked_grad(dy + o, y ? y + o : nullptr);
      const __m512 t = _mm512_fmadd_ps(b[v], _mm512_loadu_ps(x + o), k[v]);
      _mm512_storeu_ps(dx + o, _mm512_fmadd_ps(a[v], g, t));
    }
}

void grad_apply_avx512(int nv, const float* x, const float* dy, const float* y, int64_t rows,
                       int c, const float* ca, const float* cb, const float* ck, float* dx) {
  switch (nv) {
    case 1: return grad_apply<1>(x, dy, y, rows, c, ca, cb, ck, dx);
    case 2: return grad_apply<2>(x, dy, y, rows, c, ca, cb, ck, dx);
    case 3: return grad_apply<3>(x, dy, y, rows, c, ca, cb, ck, dx);
    default: return grad_apply<4>(x, dy, y, rows, c, ca, cb, ck, dx);
  }
}
#endif  // __AVX512F__

}  // namespace

void batchnorm_forward_train(const float* x, int64_t rows, int c, const float* gamma,
                             const float* beta, float momentum, float eps, float* running_mean,
                             float* running_var, float* save_mean, float* save_invstd, float* y,
                             const float* residual, bool relu) {
  MLPD_CHECK(c <= kMaxC, "batchnorm: too many channels");
  alignas(64) double sum[kMaxC], sq[kMaxC];
  alignas(64) float bs[kMaxC], bq[kMaxC];
  std::fill(sum, sum + c, 0.0);
  std::fill(sq, sq + c, 0.0);
#if defined(__AVX512F__)
  if (c % 16 == 0) {
    for (int j0 = 0; j0 < c; j0 += 64) {
      const int nv = std::min(4, (c - j0) / 16);
      stats_sums_avx512(nv, x + j0, rows, c, sum + j0, sq + j0);
    }
  } else
#endif
  for (int64_t r0 = 0; r0 < rows; r0 += kBlockRows) {
    const int64_t r1 = std::min(rows, r0 + kBlockRows);
    std::fill(bs, bs + c, 0.0f);
    std::fill(bq, bq + c, 0.0f);
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * c;
      for (int j = 0; j < c; ++j) {
        bs[j] += xr[j];
        bq[j] += xr[j] * xr[j];
      }
    }
    for (int j = 0; j < c; ++j) {
      sum[j] += bs[j];
      sq[j] += bq[j];
    }
  }
  for (int j = 0; j < c; ++j) {
    const double mean = sum[j] / double(rows);
    const double var = std::max(0.0, sq[j] / double(rows) - mean * mean);
    const double unbiased = rows > 1 ? var * double(rows) / double(rows - 1) : var;
    const float invstd = float(1.0 / std::sqrt(var + double(eps)));
    save_mean[j] = float(mean);
    save_invstd[j] = invstd;
    running_mean[j] = momentum * running_mean[j] + (1.0f - momentum) * float(mean);
    running_var[j] = momentum * running_var[j] + (1.0f - momentum) * float(unbiased);
    bs[j] = gamma[j] * invstd;                 // scale
    bq[j] = beta[j] - float(mean) * bs[j];     // shift
  }
  apply(x, rows, c, bs, bq, y, residual, relu);
}

void batchnorm_forward_eval(const float* x, int64_t rows, int c, const float* gamma,
                            const float* beta, const float* running_mean, const float* running_var,
                            float eps, float* y, const float* residual, bool relu) {
  MLPD_CHECK(c <= kMaxC, "batchnorm: too many channels");
  alignas(64) float sc[kMaxC], sh[kMaxC];
  for (int j = 0; j < c; ++j) {
    sc[j] = gamma[j] / std::sqrt(running_var[j] + eps);
    sh[j] = beta[j] - running_mean[j] * sc[j];
  }
  apply(x, rows, c, sc, sh, y, residual, relu);
}

void batchnorm_backward(const float* x, const float* dy, const float* relu_out, int64_t rows,
                        int c, const float* gamma, const float* save_mean, const float* save_invstd,
                        float* dx, float* dgamma, float* dbeta, Arena& arena) {
  ArenaScope scope(arena);
  double* sdy = static_cast<double*>(arena_bytes(arena, sizeof(double) * c));
  double* sdyx = static_cast<double*>(arena_bytes(arena, sizeof(double) * c));
  float* bs = arena_floats(arena, c);
  float* bq = arena_floats(arena, c);
  std::fill(sdy, sdy + c, 0.0);
  std::fill(sdyx, sdyx + c, 0.0);
  // Pass 1: sum(dy') and sum(dy' * (x - mean)), dy' = dy masked by the fused ReLU.
#if defined(__AVX512F__)
  const bool vec = c % 16 == 0;
  if (vec) {
    for (int j0 = 0; j0 < c; j0 += 64) {
      const int nv = std::min(4, (c - j0) / 16);
      grad_sums_avx512(nv, x + j0, dy + j0, relu_out ? relu_out + j0 : nullptr, save_mean + j0,
                       rows, c, sdy + j0, sdyx + j0);
    }
  }
  for (int64_t r0 = 0; r0 < (vec ? 0 : rows); r0 += kBlockRows) {
#else
  for (int64_t r0 = 0; r0 < rows; r0 += kBlockRows) {
#endif
    const int64_t r1 = std::min(rows, r0 + kBlockRows);
    std::fill(bs, bs + c, 0.0f);
    std::fill(bq, bq + c, 0.0f);
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * c;
      const float* dr = dy + r * c;
      if (relu_out) {
        const float* yr = relu_out + r * c;
        for (int j = 0; j < c; ++j) {
          const float g = yr[j] > 0.0f ? dr[j] : 0.0f;
          bs[j] += g;
          bq[j] += g * (xr[j] - save_mean[j]);
        }
      } else {
        for (int j = 0; j < c; ++j) {
          bs[j] += dr[j];
          bq[j] += dr[j] * (xr[j] - save_mean[j]);
        }
      }
    }
    for (int j = 0; j < c; ++j) {
      sdy[j] += bs[j];
      sdyx[j] += bq[j];
    }
  }
  // Per channel: dx = gamma*invstd*(dy' - mean(dy') - xhat*mean(dy'*xhat)) = a*dy' + b*x + k.
  float* ca = bs;  // reuse the block buffers as per-channel coefficients
  float* cb = bq;
  float* ck = arena_floats(arena, c);
  const double inv_rows = 1.0 / double(rows);
  for (int j = 0; j < c; ++j) {
    const double invstd = save_invstd[j];
    const double sum_dy_xhat = sdyx[j] * invstd;
    dbeta[j] += float(sdy[j]);
    dgamma[j] += float(sum_dy_xhat);
    const double a = double(gamma[j]) * invstd;
    const double b = -a * invstd * sum_dy_xhat * inv_rows;  // coefficient of (x - mean)
    ca[j] = float(a);
    cb[j] = float(b);
    ck[j] = float(-a * sdy[j] * inv_rows - b * double(save_mean[j]));
  }
#if defined(__AVX512F__)
  if (vec) {
    for (int j0 = 0; j0 < c; j0 += 64) {
      const int nv = std::min(4, (c - j0) / 16);
      grad_apply_avx512(nv, x + j0, dy + j0, relu_out ? relu_out + j0 : nullptr, rows, c, ca + j0,
                        cb + j0, ck + j0, dx + j0);
    }
    return;
  }
#endif
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * c;
    const float* dr = dy + r * c;
    float* o = dx + r * c;
    if (relu_out) {
      const float* yr = relu_out + r * c;
      for (int j = 0; j < c; ++j) {
        const float g = yr[j] > 0.0f ? dr[j] : 0.0f;
        o[j] = ca[j] * g + cb[j] * xr[j] + ck[j];
      }
    } else {
      for (int j = 0; j < c; ++j) o[j] = ca[j] * dr[j] + cb[j] * xr[j] + ck[j];
    }
  }
}

}  // namespace mlpd
