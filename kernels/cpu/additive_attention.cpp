// Normalized Bahdanau attention (gnmt), fused, on the CPU.
//   vn = g * v / ||v||;  score[b,i,j] = vn . tanh(qp[b,i,:] + kp[b,j,:] + bias);  masked softmax over j;
//   context[b,i,:] = sum_j probs[b,i,j] * values[b,j,:].
// The cost is the tanh of every (b, i, j, a): batch*q_len*k_len*units of them (118M at 128 x 60 x 60
// x 256), once in the forward and once in the backward (recomputed, never stored). So the inner
// loops run over `units` contiguous floats with a tanh written in plain arithmetic (tanh_fast, below)
// that the compiler vectorises; a libm tanhf call would keep those loops scalar. Reductions over a
// contiguous axis (scores, dot products) go through 16 fixed lanes folded in a fixed order, because
// the compiler may not reorder a float sum by itself.
// Parameter gradients (dbias, dv, dg) are summed per query row in float and across rows in double.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/fast_math.h"
#include "kernels/ops.h"

namespace mlpd {

namespace {

constexpr int kLanes = 16;

using cpu::tanh_fast;

// Sum of x[0, n) in 16 lanes folded pairwise: a fixed order the compiler can vectorise.
inline float lane_sum(const float* x, int n) {
  float acc[kLanes] = {};
  int a = 0;
  for (; a + kLanes <= n; a += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += x[a + l];
  for (int l = 0; a < n; ++a, ++l) acc[l] += x[a];
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0];
}

inline float lane_dot(const float* x, const float* y, int n) {
  float acc[kLanes] = {};
  int a = 0;
  for (; a + kLanes <= n; a += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += x[a + l] * y[a + l];
  for (int l = 0; a < n; ++a, ++l) acc[l] += x[a] * y[a];
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0];
}

inline int key_count(const AdditiveAttentionDims& d, const int32_t* key_lengths, int b) {
  return key_lengths ? std::clamp(key_lengths[b], 0, d.k_len) : d.k_len;
}

// ||v|| in double, and vn = g * v / ||v||.
double normalise(const float* v, float g, int units, float* vn) {
  double sq = 0.0;
  for (int a = 0; a < units; ++a) sq += double(v[a]) * double(v[a]);
  const double norm = std::sqrt(sq);
  const float scale = float(double(g) / norm);
  for (int a = 0; a < units; ++a) vn[a] = scale * v[a];
  return norm;
}

}  // namespace

void additive_attention_forward(const AdditiveAttentionDims& d, const float* qp, const float* kp, const float* bias,
                                const float* v, const float* g, const float* values, const int32_t* key_lengths,
                                float* probs, float* context, int ld_context) {
  const int U = d.units, V = d.value_dim;
  std::vector<float> buf(3 * size_t(U));
  float* __restrict vn = buf.data();
  float* __restrict qb = vn + U;   // qp row + bias
  float* __restrict tmp = qb + U;  // vn * tanh(.) of one key
  normalise(v, g[0], U, vn);
  for (int b = 0; b < d.batch; ++b) {
    const int len = key_count(d, key_lengths, b);
    const float* kb = kp + size_t(b) * d.k_len * U;
    const float* vb = values + size_t(b) * d.k_len * V;
    for (int i = 0; i < d.q_len; ++i) {
      const size_t row = size_t(b) * d.q_len + i;
      const float* q = qp + row * U;
      float* p = probs + row * d.k_len;
      float* ctx = context + row * size_t(ld_context);
      for (int a = 0; a < U; ++a) qb[a] = q[a] + bias[a];
      float mx = -INFINITY;
      for (int j = 0; j < len; ++j) {
        const float* __restrict k = kb + size_t(j) * U;
        for (int a = 0; a < U; ++a) tmp[a] = vn[a] * tanh_fast(qb[a] + k[a]);
        p[j] = lane_sum(tmp, U);
        mx = std::max(mx, p[j]);
      }
      float sum = 0.0f;
      for (int j = 0; j < len; ++j) {
        p[j] = std::exp(p[j] - mx);
        sum += p[j];
      }
      const float inv = len > 0 ? 1.0f / sum : 0.0f;
      for (int j = 0; j < len; ++j) p[j] *= inv;
      for (int j = len; j < d.k_len; ++j) p[j] = 0.0f;
      std::fill(ctx, ctx + V, 0.0f);
      for (int j = 0; j < len; ++j) {
        const float pj = p[j];
        const float* __restrict val = vb + size_t(j) * V;
        for (int c = 0; c < V; ++c) ctx[c] += pj * val[c];
      }
    }
  }
}

void additive_attention_backward(const AdditiveAttentionDims& d, const float* qp, const float* kp, const float* bias,
                                 const float* v, const float* g, const float* values, const int32_t* key_lengths,
                                 const float* probs, const float* dcontext, int ld_context, float* dqp, float* dkp,
                                 float* dvalues, float* dbias, float* dv, float* dg) {
  const int U = d.units, V = d.value_dim;
  std::vector<float> buf(3 * size_t(U) + size_t(d.k_len));
  float* __restrict vn = buf.data();
  float* __restrict qb = vn + U;
  float* __restrict dvn_row = qb + U;  // one query row's d(vn), summed over its keys
  float* __restrict ds = dvn_row + U;  // d(score) of the row's keys
  std::vector<double> dvn_acc(U, 0.0), dbias_acc(U, 0.0);
  const double norm = normalise(v, g[0], U, vn);
  for (int b = 0; b < d.batch; ++b) {
    const int len = key_count(d, key_lengths, b);
    const float* kb = kp + size_t(b) * d.k_len * U;
    const float* vb = values + size_t(b) * d.k_len * V;
    float* dkb = dkp + size_t(b) * d.k_len * U;
    float* dvb = dvalues + size_t(b) * d.k_len * V;
    std::fill(dkb, dkb + size_t(d.k_len) * U, 0.0f);
    std::fill(dvb, dvb + size_t(d.k_len) * V, 0.0f);
    for (int i = 0; i < d.q_len; ++i) {
      const size_t row = size_t(b) * d.q_len + i;
      const float* q = qp + row * U;
      const float* p = probs + row * d.k_len;
      const float* __restrict dctx = dcontext + row * size_t(ld_context);
      float* __restrict dq = dqp + row * U;
      // dvalues[j] += p_j dctx;  dp_j = dctx . values[j];  ds_j = p_j (dp_j - sum_k p_k dp_k).
      float pdp = 0.0f;
      for (int j = 0; j < len; ++j) {
        const float* val = vb + size_t(j) * V;
        float* __restrict dval = dvb + size_t(j) * V;
        const float pj = p[j];
        for (int c = 0; c < V; ++c) dval[c] += pj * dctx[c];
        ds[j] = lane_dot(dctx, val, V);
        pdp += pj * ds[j];
      }
      for (int j = 0; j < len; ++j) ds[j] = p[j] * (ds[j] - pdp);
      // Through the scores: de = ds * vn * (1 - tanh^2) goes to qp, kp and bias; ds * tanh to vn.
      for (int a = 0; a < U; ++a) qb[a] = q[a] + bias[a];
      std::fill(dq, dq + U, 0.0f);
      std::fill(dvn_row, dvn_row + U, 0.0f);
      for (int j = 0; j < len; ++j) {
        const float s = ds[j];
        if (s == 0.0f) continue;  // an underflowed probability: nothing flows back
        const float* __restrict k = kb + size_t(j) * U;
        float* __restrict dk = dkb + size_t(j) * U;
        for (int a = 0; a < U; ++a) {
          const float th = tanh_fast(qb[a] + k[a]);
          const float de = s * vn[a] * (1.0f - th * th);
          dvn_row[a] += s * th;
          dq[a] += de;
          dk[a] += de;
        }
      }
      for (int a = 0; a < U; ++a) {
        dvn_acc[a] += double(dvn_row[a]);
        dbias_acc[a] += double(dq[a]);
      }
    }
  }
  // Through vn = g u, u = v / ||v||:  dg = u . dvn;  dv = g / ||v|| * (dvn - u (u . dvn)).
  double udv = 0.0;
  for (int a = 0; a < U; ++a) udv += double(v[a]) / norm * dvn_acc[a];
  const double gn = double(g[0]) / norm;
  for (int a = 0; a < U; ++a) {
    dbias[a] += float(dbias_acc[a]);
    dv[a] += float(gn * (dvn_acc[a] - double(v[a]) / norm * udv));
  }
  dg[0] += float(udv);
}

}  // namespace mlpd
