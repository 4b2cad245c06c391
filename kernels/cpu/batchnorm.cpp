// Batch norm over [rows, c] (NHWC flattened). Statistics are accumulated per channel in float
// over blocks of rows, then folded into double, so long reductions stay accurate and the inner
// loops (over contiguous channels) vectorise.
#include <algorithm>
#include <cmath>
#include <cstring>

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
  for (int64_t r0 = 0; r0 < rows; r0 += kBlockRows) {
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
