// Layer norm over rows of d contiguous features on the CPU. Row statistics are two-pass (mean,
// then the mean of squared deviations, so no cancellation), each pass summed in 16 float lanes
// (one AVX-512 register, which GCC vectorises without reassociation) folded into double.
// dgamma and dbeta are column sums over rows: summed in float over blocks of 64 rows, each block
// folded into double, then added to the caller's accumulators once.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ops.h"

namespace mlpd {

namespace {

constexpr int kLanes = 16;
constexpr int64_t kBlockRows = 64;

// sum of f(j) for j < d, f evaluated in float, summed in kLanes float lanes then in double.
template <typename F>
inline double lane_sum(int d, F f) {
  float acc[kLanes] = {};
  int j = 0;
  for (; j + kLanes <= d; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += f(j + l);
  double s = 0.0;
  for (; j < d; ++j) s += double(f(j));
  for (int l = 0; l < kLanes; ++l) s += double(acc[l]);
  return s;
}

}  // namespace

void layernorm_forward(const float* x, int64_t rows, int d, const float* gamma, const float* beta, float eps,
                       float* y, float* save_mean, float* save_invstd) {
  if (d <= 0) return;
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * d;
    float* __restrict yr = y + r * d;
    const double mean_d = lane_sum(d, [&](int j) { return xr[j]; }) / double(d);
    const float mean = float(mean_d);
    const double var = lane_sum(d, [&](int j) {
                         const float c = xr[j] - mean;
                         return c * c;
                       }) / double(d);
    const float invstd = float(1.0 / std::sqrt(var + double(eps)));
    save_mean[r] = mean;
    save_invstd[r] = invstd;
    for (int j = 0; j < d; ++j) yr[j] = gamma[j] * ((xr[j] - mean) * invstd) + beta[j];
  }
}

// With xhat = (x - mean)*invstd and g = dy*gamma:
//   dx = invstd * (g - mean(g) - xhat * mean(g*xhat)),  dgamma += sum_rows dy*xhat,  dbeta += sum_rows dy.
void layernorm_backward(const float* x, const float* dy, int64_t rows, int d, const float* gamma,
                        const float* save_mean, const float* save_invstd, float* dx, float* dgamma, float* dbeta,
                        bool accumulate) {
  if (d <= 0) return;
  std::vector<float> xhat(d), bg(d, 0.0f), bb(d, 0.0f);  // row scratch, block sums of dgamma, dbeta
  std::vector<double> tg(d, 0.0), tb(d, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * d;
    const float* dr = dy + r * d;  // dx may alias dy: each dx[j] is written after its dy[j] is read
    float* o = dx + r * d;
    float* __restrict xh = xhat.data();
    float* __restrict sg = bg.data();
    float* __restrict sb = bb.data();
    const float mean = save_mean[r], invstd = save_invstd[r];
    for (int j = 0; j < d; ++j) {
      xh[j] = (xr[j] - mean) * invstd;
      sg[j] += dr[j] * xh[j];
      sb[j] += dr[j];
    }
    const float inv_d = 1.0f / float(d);
    const float mg = float(lane_sum(d, [&](int j) { return dr[j] * gamma[j]; })) * inv_d;
    const float mgx = float(lane_sum(d, [&](int j) { return dr[j] * gamma[j] * xh[j]; })) * inv_d;
    if (accumulate) {
      for (int j = 0; j < d; ++j) o[j] += invstd * (dr[j] * gamma[j] - mg - xh[j] * mgx);
    } else {
      for (int j = 0; j < d; ++j) o[j] = invstd * (dr[j] * gamma[j] - mg - xh[j] * mgx);
    }
    if ((r + 1) % kBlockRows == 0 || r + 1 == rows) {
      for (int j = 0; j < d; ++j) {
        tg[j] += double(sg[j]);
        tb[j] += double(sb[j]);
        sg[j] = 0.0f;
        sb[j] = 0.0f;
      }
    }
  }
  for (int j = 0; j < d; ++j) {
    dgamma[j] += float(tg[j]);
    dbeta[j] += float(tb[j]);
  }
}

}  // namespace mlpd
