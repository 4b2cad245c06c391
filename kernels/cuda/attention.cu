// Fused multi-head scaled dot-product attention on the GPU, with the CPU's semantics
// (kernels/cpu/attention.cpp). No atomics and fixed reduction trees, so every run gives the same bits.
// Forward: one block per (query row, head, batch row). The query row and the row's scores sit in
// shared memory; each warp takes keys in turn (a dot product over the head's columns, lanes over
// columns); the block takes the max and the sum of the softmax with fixed trees; then each thread
// owns output columns and sums probabilities times values over the visible keys in order.
// Backward: (1) one block per query row computes dP = dO v^T for the keys its probabilities reach,
// dS = scale * P * (dP - rowsum(P*dP)) (kept in a device scratch buffer) and dQ = dS K; (2) one block
// per key row computes dV = P^T dO and dK = dS^T Q, summing over the queries in order. Keys with
// probability 0 are skipped, so padded rows of k or v never enter a sum (as on the CPU).
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/bf16.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mlpd::cuda {

namespace {

constexpr int kAttnThreads = 128;
constexpr int kAttnWarps = kAttnThreads / 32;
constexpr size_t kDefaultSharedBytes = 48 * 1024;

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;  // every lane holds the total
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// The block's total (or max) of one value per thread, returned to every thread; red: kAttnWarps floats.
template <bool Max>
__device__ __forceinline__ float block_reduce(float v, float* red) {
  v = Max ? warp_max(v) : warp_sum(v);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float t = red[0];
  for (int w = 1; w < kAttnWarps; ++w) t = Max ? fmaxf(t, red[w]) : t + red[w];
  __syncthreads();  // red may be reused at once
  return t;
}

// Visible keys of query i: a prefix [0, n) of the keys (as visible_keys on the CPU).
__device__ __forceinline__ int visible_keys(int key_length, int k_len, int q_len, bool causal, int i) {
  int n = key_length < k_len ? key_length : k_len;
  if (causal) n = min(n, i + (k_len - q_len) + 1);
  return n > 0 ? n : 0;
}

// A key or value as fp32: itself, or a bf16 one widened (exact), so both forwards do the same sums.
__device__ __forceinline__ float kv_value(float x) { return x; }
__device__ __forceinline__ float kv_value(uint16_t x) { return bf16_to_f32(x); }

// Shared memory of the forward: q row [head_dim], scores [k_len], reduction [kAttnWarps].
// KV: float, or uint16_t for keys and values kept as bf16 bits.
template <class KV>
__global__ void __launch_bounds__(kAttnThreads)
    attention_forward_kernel(int heads, int q_len, int k_len, int hd, bool causal, float scale,
                             const float* __restrict__ q, int ldq, const KV* __restrict__ k, int ldk,
                             const KV* __restrict__ v, int ldv, const int32_t* __restrict__ key_lengths,
                             float* __restrict__ probs, float* __restrict__ out, int ldo) {
  extern __shared__ float shared[];
  float* sq = shared;
  float* s = sq + hd;
  float* red = s + k_len;
  const int i = int(blockIdx.x), h = int(blockIdx.y), b = int(blockIdx.z);
  const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int nv = visible_keys(key_lengths ? int(key_lengths[b]) : k_len, k_len, q_len, causal, i);
  const size_t col = size_t(h) * hd;
  float* prow = probs + ((size_t(b) * heads + h) * q_len + i) * size_t(k_len);
  float* orow = out + (size_t(b) * q_len + i) * size_t(ldo) + col;
  if (nv == 0) {  // every key masked: probabilities and output 0 (the whole block leaves)
    for (int j = tid; j < k_len; j += kAttnThreads) prow[j] = 0.0f;
    for (int c = tid; c < hd; c += kAttnThreads) orow[c] = 0.0f;
    return;
  }
  const float* qrow = q + (size_t(b) * q_len + i) * size_t(ldq) + col;
  for (int c = tid; c < hd; c += kAttnThreads) sq[c] = qrow[c];
  __syncthreads();
  const KV* kb = k + size_t(b) * k_len * size_t(ldk) + col;
  for (int j = warp; j < nv; j += kAttnWarps) {
    const KV* kr = kb + size_t(j) * ldk;
    float part = 0.0f;
    for (int c = lane; c < hd; c += 32) part += sq[c] * kv_value(kr[c]);
    part = warp_sum(part);
    if (lane == 0) s[j] = part * scale;
  }
  __syncthreads();
  float m = -INFINITY;
  for (int j = tid; j < nv; j += kAttnThreads) m = fmaxf(m, s[j]);
  m = block_reduce<true>(m, red);
  float sum = 0.0f;
  for (int j = tid; j < nv; j += kAttnThreads) {
    const float e = expf(s[j] - m);
    s[j] = e;
    sum += e;
  }
  sum = block_reduce<false>(sum, red);  // its barrier also publishes the e values
  const float inv = 1.0f / sum;
  for (int j = tid; j < k_len; j += kAttnThreads) {
    const float p = j < nv ? s[j] * inv : 0.0f;
    if (j < nv) s[j] = p;
    prow[j] = p;
  }
  __syncthreads();
  const KV* vb = v + size_t(b) * k_len * size_t(ldv) + col;
  for (int c = tid; c < hd; c += kAttnThreads) {
    float acc = 0.0f;
    for (int j = 0; j < nv; ++j) acc += s[j] * kv_value(vb[size_t(j) * ldv + c]);
    orow[c] = acc;
  }
}

// Backward, per query row. Shared memory: dO row [head_dim], p row [k_len], dP then dS [k_len],
// reduction [kAttnWarps]. Writes ds [batch, heads, q_len, k_len] and the dq row.
__global__ void __launch_bounds__(kAttnThreads)
    attention_backward_query_kernel(int heads, int q_len, int k_len, int hd, float scale,
                                    const float* __restrict__ k, int ldk, const float* __restrict__ v, int ldv,
                                    const float* __restrict__ probs, const float* __restrict__ dout, int ldo,
                                    float* __restrict__ ds, float* __restrict__ dq, int ldq) {
  extern __shared__ float shared[];
  float* sdo = shared;
  float* sp = sdo + hd;
  float* sd = sp + k_len;
  float* red = sd + k_len;
  const int i = int(blockIdx.x), h = int(blockIdx.y), b = int(blockIdx.z);
  const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const size_t col = size_t(h) * hd;
  const size_t prow_off = ((size_t(b) * heads + h) * q_len + i) * size_t(k_len);
  const float* dorow = dout + (size_t(b) * q_len + i) * size_t(ldo) + col;
  for (int c = tid; c < hd; c += kAttnThreads) sdo[c] = dorow[c];
  for (int j = tid; j < k_len; j += kAttnThreads) sp[j] = probs[prow_off + j];
  __syncthreads();
  const float* vb = v + size_t(b) * k_len * size_t(ldv) + col;
  for (int j = warp; j < k_len; j += kAttnWarps) {
    if (sp[j] == 0.0f) {  // uniform over the warp
      if (lane == 0) sd[j] = 0.0f;
      continue;
    }
    const float* vr = vb + size_t(j) * ldv;
    float part = 0.0f;
    for (int c = lane; c < hd; c += 32) part += sdo[c] * vr[c];
    part = warp_sum(part);
    if (lane == 0) sd[j] = part;
  }
  __syncthreads();
  float dot = 0.0f;
  for (int j = tid; j < k_len; j += kAttnThreads) dot += sp[j] * sd[j];
  dot = block_reduce<false>(dot, red);
  for (int j = tid; j < k_len; j += kAttnThreads) {
    const float g = sp[j] == 0.0f ? 0.0f : scale * (sp[j] * (sd[j] - dot));
    sd[j] = g;
    ds[prow_off + j] = g;
  }
  __syncthreads();
  const float* kb = k + size_t(b) * k_len * size_t(ldk) + col;
  float* dqrow = dq + (size_t(b) * q_len + i) * size_t(ldq) + col;
  for (int c = tid; c < hd; c += kAttnThreads) {
    float acc = 0.0f;
    for (int j = 0; j < k_len; ++j)
      if (sp[j] != 0.0f) acc += sd[j] * kb[size_t(j) * ldk + c];
    dqrow[c] = acc;
  }
}

// Backward, per key row j: dv[j] = sum_i p_ij dO_i, dk[j] = sum_i ds_ij q_i, queries in order.
__global__ void __launch_bounds__(kAttnThreads)
    attention_backward_key_kernel(int heads, int q_len, int k_len, int hd, const float* __restrict__ q, int ldq,
                                  const float* __restrict__ probs, const float* __restrict__ ds,
                                  const float* __restrict__ dout, int ldo, float* __restrict__ dk, int ldk,
                                  float* __restrict__ dv, int ldv) {
  const int j = int(blockIdx.x), h = int(blockIdx.y), b = int(blockIdx.z);
  const size_t col = size_t(h) * hd;
  const size_t pbase = (size_t(b) * heads + h) * q_len * size_t(k_len) + j;
  const float* qb = q + size_t(b) * q_len * size_t(ldq) + col;
  const float* dob = dout + size_t(b) * q_len * size_t(ldo) + col;
  for (int c = int(threadIdx.x); c < hd; c += kAttnThreads) {
    float av = 0.0f, ak = 0.0f;
    for (int i = 0; i < q_len; ++i) {
      const float p = probs[pbase + size_t(i) * k_len];
      if (p == 0.0f) continue;  // uniform over the block
      av += p * dob[size_t(i) * ldo + c];
      ak += ds[pbase + size_t(i) * k_len] * qb[size_t(i) * ldq + c];
    }
    dv[(size_t(b) * k_len + j) * size_t(ldv) + col + c] = av;
    dk[(size_t(b) * k_len + j) * size_t(ldk) + col + c] = ak;
  }
}

// Raises a kernel's dynamic shared memory limit where a long key sequence needs more than 48 KiB.
template <typename Kernel>
void allow_shared(Kernel kernel, size_t bytes) {
  if (bytes > kDefaultSharedBytes)
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

// The backward's dS [batch, heads, q_len, k_len]: grown to the largest call so far, then reused
// (one GPU per process; a process that switches GPUs gets a new buffer and leaves the old one).
float* ds_buffer(size_t floats) {
  static float* buf = nullptr;
  static size_t capacity = 0;
  static int on_device = -1;
  int device = -1;
  CUDA_CHECK(cudaGetDevice(&device));
  if (buf && device == on_device && capacity >= floats) return buf;
  if (buf && device == on_device) {
    CUDA_CHECK(cudaStreamSynchronize(stream()));  // queued kernels may still use the old buffer
    float* old = buf;
    buf = nullptr;
    capacity = 0;
    CUDA_CHECK(cudaFree(old));
  }
  buf = nullptr;
  capacity = 0;
  const size_t want = floats + floats / 4;  // headroom: the lengths vary from batch to batch
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&buf), sizeof(float) * want));
  on_device = device;
  capacity = want;
  return buf;
}

template <class KV>
void launch_attention_forward(const AttentionDims& d, const float* q, int ldq, const KV* k, int ldk, const KV* v,
                              int ldv, const int32_t* key_lengths, float* probs, float* out, int ldo) {
  if (d.batch <= 0 || d.heads <= 0 || d.q_len <= 0 || d.head_dim <= 0 || d.k_len < 0) return;
  const float scale = 1.0f / std::sqrt(float(d.head_dim));
  const size_t shared = sizeof(float) * (size_t(d.head_dim) + size_t(d.k_len) + kAttnWarps);
  allow_shared(attention_forward_kernel<KV>, shared);
  const dim3 grid(unsigned(d.q_len), unsigned(d.heads), unsigned(d.batch));
  attention_forward_kernel<KV><<<grid, kAttnThreads, shared, stream()>>>(d.heads, d.q_len, d.k_len, d.head_dim,
                                                                         d.causal, scale, q, ldq, k, ldk, v, ldv,
                                                                         key_lengths, probs, out, ldo);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void attention_forward(const AttentionDims& d, const float* q, int ldq, const float* k, int ldk, const float* v,
                       int ldv, const int32_t* key_lengths, float* probs, float* out, int ldo) {
  launch_attention_forward(d, q, ldq, k, ldk, v, ldv, key_lengths, probs, out, ldo);
}

void attention_forward_bf16_kv(const AttentionDims& d, const float* q, int ldq, const uint16_t* k16, int ldk,
                               const uint16_t* v16, int ldv, const int32_t* key_lengths, float* probs, float* out,
                               int ldo) {
  launch_attention_forward(d, q, ldq, k16, ldk, v16, ldv, key_lengths, probs, out, ldo);
}

void attention_backward(const AttentionDims& d, const float* q, int ldq, const float* k, int ldk, const float* v,
                        int ldv, const float* probs, const float* dout, int ldo, float* dq, float* dk, float* dv) {
  if (d.batch <= 0 || d.heads <= 0 || d.head_dim <= 0 || d.q_len < 0 || d.k_len < 0) return;
  if (d.q_len == 0 && d.k_len == 0) return;
  const float scale = 1.0f / std::sqrt(float(d.head_dim));
  float* ds = ds_buffer(size_t(d.batch) * d.heads * size_t(d.q_len) * size_t(d.k_len) + 1);
  if (d.q_len > 0) {
    const size_t shared = sizeof(float) * (size_t(d.head_dim) + 2 * size_t(d.k_len) + kAttnWarps);
    allow_shared(attention_backward_query_kernel, shared);
    const dim3 grid(unsigned(d.q_len), unsigned(d.heads), unsigned(d.batch));
    attention_backward_query_kernel<<<grid, kAttnThreads, shared, stream()>>>(
        d.heads, d.q_len, d.k_len, d.head_dim, scale, k, ldk, v, ldv, probs, dout, ldo, ds, dq, ldq);
    CUDA_CHECK_LAUNCH();
  }
  if (d.k_len > 0) {
    const dim3 grid(unsigned(d.k_len), unsigned(d.heads), unsigned(d.batch));
    attention_backward_key_kernel<<<grid, kAttnThreads, 0, stream()>>>(d.heads, d.q_len, d.k_len, d.head_dim, q,
                                                                        ldq, probs, ds, dout, ldo, dk, ldk, dv, ldv);
    CUDA_CHECK_LAUNCH();
  }
}

}  // namespace mlpd::cuda
