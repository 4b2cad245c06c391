// Fused multi-head scaled dot-product attention on the CPU: per (batch row, head), three GEMMs
// (OpenBLAS, through kernels/cpu/gemm.cpp) on the head's column block, read and written in place
// through the leading dimensions, and a row softmax between them. Keys and values kept as bf16
// (attention_forward_bf16_kv) are widened one head's block at a time for those GEMMs.
// Only the keys that some query of the pair can see enter the GEMMs: keys [0, kmax) with
// kmax = min(key_lengths[b], k_len) forward; backward, which has no key_lengths, takes kmax = 1 + the
// last key column with a non-zero probability (exact: a column of zero probabilities has zero
// gradients). So padded keys cost nothing, and a non-finite value in a padded row of k or v
// cannot leak into the outputs through 0 * inf.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/ops.h"

namespace mlpd {

namespace {

// Visible keys of query i: a prefix [0, n) of the keys.
inline int visible_keys(const AttentionDims& d, int key_length, int i) {
  int n = std::min(key_length, d.k_len);
  if (d.causal) n = std::min(n, i + (d.k_len - d.q_len) + 1);
  return std::max(n, 0);
}

// Softmax of s[0, n) in place (max subtracted, sum in float), s[n, k_len) = 0.
inline void softmax_prefix(float* s, int n, int k_len) {
  if (n > 0) {
    float m = s[0];
    for (int j = 1; j < n; ++j) m = std::max(m, s[j]);
    float sum = 0.0f;
    for (int j = 0; j < n; ++j) {
      s[j] = std::exp(s[j] - m);
      sum += s[j];
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < n; ++j) s[j] *= inv;
  }
  for (int j = n; j < k_len; ++j) s[j] = 0.0f;
}

}  // namespace

namespace {

// A head's column block of k or v as the GEMMs read it: in place (fp32), or its bf16 values widened
// into a dense [rows x head_dim] scratch (exact, so the same numbers enter the same GEMM).
struct HeadBlock {
  const float* data;
  int ld;
};
HeadBlock head_block(const float* x, int ld, int, int, std::vector<float>&) { return {x, ld}; }
HeadBlock head_block(const uint16_t* x, int ld, int rows, int hd, std::vector<float>& scratch) {
  scratch.resize(std::max(size_t(rows) * size_t(hd), size_t(1)));
  if (rows > 0) bf16_unpack_rows(x, rows, hd, ld, scratch.data(), hd);
  return {scratch.data(), hd};
}

template <class KV>
void attention_forward_on(const AttentionDims& d, const float* q, int ldq, const KV* k, int ldk, const KV* v, int ldv,
                          const int32_t* key_lengths, float* probs, float* out, int ldo) {
  const int hd = d.head_dim, ql = d.q_len, kl = d.k_len;
  if (ql <= 0 || hd <= 0) return;
  const float scale = 1.0f / std::sqrt(float(hd));
  thread_local std::vector<float> k_scratch, v_scratch;  // bf16 k, v only; grown once, then reused
  for (int b = 0; b < d.batch; ++b) {
    const int kmax = std::clamp(key_lengths ? int(key_lengths[b]) : kl, 0, kl);
    for (int h = 0; h < d.heads; ++h) {
      const float* qh = q + size_t(b) * ql * ldq + size_t(h) * hd;
      const HeadBlock kh = head_block(k + size_t(b) * kl * ldk + size_t(h) * hd, ldk, kmax, hd, k_scratch);
      const HeadBlock vh = head_block(v + size_t(b) * kl * ldv + size_t(h) * hd, ldv, kmax, hd, v_scratch);
      float* oh = out + size_t(b) * ql * ldo + size_t(h) * hd;
      float* p = probs + (size_t(b) * d.heads + h) * size_t(ql) * kl;
      if (kmax > 0) gemm(false, true, ql, kmax, hd, scale, qh, ldq, kh.data, kh.ld, 0.0f, p, kl);  // scores
      for (int i = 0; i < ql; ++i) softmax_prefix(p + size_t(i) * kl, visible_keys(d, kmax, i), kl);
      gemm(false, false, ql, hd, kmax, 1.0f, p, kl, vh.data, vh.ld, 0.0f, oh, ldo);  // kmax == 0: out = 0
    }
  }
}

}  // namespace

void attention_forward(const AttentionDims& d, const float* q, int ldq, const float* k, int ldk, const float* v,
                       int ldv, const int32_t* key_lengths, float* probs, float* out, int ldo) {
  attention_forward_on(d, q, ldq, k, ldk, v, ldv, key_lengths, probs, out, ldo);
}

void attention_forward_bf16_kv(const AttentionDims& d, const float* q, int ldq, const uint16_t* k16, int ldk,
                               const uint16_t* v16, int ldv, const int32_t* key_lengths, float* probs, float* out,
                               int ldo) {
  attention_forward_on(d, q, ldq, k16, ldk, v16, ldv, key_lengths, probs, out, ldo);
}

// With P the probabilities and dO the output's gradient (per batch row and head):
//   dV = P^T dO;  dP = dO V^T;  dS = P * (dP - rowsum(P * dP));  dQ = scale dS K;  dK = scale dS^T Q.
void attention_backward(const AttentionDims& d, const float* q, int ldq, const float* k, int ldk, const float* v,
                        int ldv, const float* probs, const float* dout, int ldo, float* dq, float* dk, float* dv) {
  const int hd = d.head_dim, ql = d.q_len, kl = d.k_len;
  if (hd <= 0 || kl < 0 || ql < 0) return;
  const float scale = 1.0f / std::sqrt(float(hd));
  std::vector<float> ds(size_t(ql) * size_t(kl));
  for (int b = 0; b < d.batch; ++b) {
    for (int h = 0; h < d.heads; ++h) {
      const size_t qoff = size_t(b) * ql, koff = size_t(b) * kl, col = size_t(h) * hd;
      const float* qh = q + qoff * ldq + col;
      const float* kh = k + koff * ldk + col;
      const float* vh = v + koff * ldv + col;
      const float* doh = dout + qoff * ldo + col;
      float* dqh = dq + qoff * ldq + col;
      float* dkh = dk + koff * ldk + col;
      float* dvh = dv + koff * ldv + col;
      const float* p = probs + (size_t(b) * d.heads + h) * size_t(ql) * kl;
      int kmax = 0;
      for (int i = 0; i < ql; ++i)
        for (int j = kl - 1; j >= kmax; --j)
          if (p[size_t(i) * kl + j] != 0.0f) {
            kmax = j + 1;
            break;
          }
      // Keys no query sees: zero gradients (the overwrite contract).
      for (int j = kmax; j < kl; ++j)
        for (int c = 0; c < hd; ++c) {
          dkh[size_t(j) * ldk + c] = 0.0f;
          dvh[size_t(j) * ldv + c] = 0.0f;
        }
      if (kmax == 0 || ql == 0) {
        for (int i = 0; i < ql; ++i)
          for (int c = 0; c < hd; ++c) dqh[size_t(i) * ldq + c] = 0.0f;
        continue;
      }
      gemm(true, false, kmax, hd, ql, 1.0f, p, kl, doh, ldo, 0.0f, dvh, ldv);          // dV
      gemm(false, true, ql, kmax, hd, 1.0f, doh, ldo, vh, ldv, 0.0f, ds.data(), kmax);  // dP
      for (int i = 0; i < ql; ++i) {
        const float* pr = p + size_t(i) * kl;
        float* sr = ds.data() + size_t(i) * kmax;
        float dot = 0.0f;
        for (int j = 0; j < kmax; ++j) dot += pr[j] * sr[j];
        for (int j = 0; j < kmax; ++j) sr[j] = pr[j] == 0.0f ? 0.0f : pr[j] * (sr[j] - dot);
      }
      gemm(false, false, ql, hd, kmax, scale, ds.data(), kmax, kh, ldk, 0.0f, dqh, ldq);  // dQ
      gemm(true, false, kmax, hd, ql, scale, ds.data(), kmax, qh, ldq, 0.0f, dkh, ldk);   // dK
    }
  }
}

}  // namespace mlpd
