// Normalized Bahdanau attention (gnmt) on the GPU, with the CPU's semantics
// (kernels/cpu/additive_attention.cpp):
//   vn = g * v / ||v||;  score[b,i,j] = vn . tanh(qp[b,i,:] + bias + kp[b,j,:]);  masked softmax over j;
//   context[b,i,:] = sum_j probs[b,i,j] * values[b,j,:].
// Forward: one block per query row (b, i). ||v|| is recomputed by every block (units is small); each
// warp scores keys (lanes over units, a fixed shuffle tree), warp 0 takes the softmax, and the
// threads then walk the value columns.
// Backward, the tanh terms recomputed, never stored:
//   A. one block per query row: dp_j = dcontext . values[j], ds_j = p_j (dp_j - sum_k p_k dp_k)
//      (saved to scratch, [batch, q_len, k_len]); per unit a, dqp = sum_j ds_j vn_a (1 - tanh^2) and
//      the row's partial d(vn)_a = sum_j ds_j tanh, both summed over j in order;
//   B. one block per key row (b, j): dkp = vn_a sum_i ds_ij (1 - tanh^2) and dvalues = sum_i p_ij dcontext_i,
//      summed over i in order (zero rows for masked keys);
//   C. column sums over the query rows of dqp (-> dbias) and of the partial d(vn), in double, each
//      block a tile of 32 units with 8 row lanes folded in a fixed tree;
//   D. one block: dbias += , dg += u . dvn and dv += g/||v|| (dvn - u (u . dvn)), u = v / ||v||.
// Nothing uses atomics: every sum has a fixed order, so a run gives the same bits every time.
// Scratch: ds, the partials and the column sums live in a device buffer of this file (the op has no
// arena), grown on the calls that need more and then reused.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/reduce.cuh"

namespace mlpd::cuda {

namespace {

constexpr int kAttnThreads = int(kReduceThreads);  // block_sum's block size
constexpr int kWarps = kAttnThreads / 32;
constexpr int kColTile = 32, kColLanes = 8;
constexpr size_t kMaxShared = 48 * 1024;  // without opting in to more

char* scratch_buffer(size_t bytes) {
  static char* buf = nullptr;
  static size_t capacity = 0;
  static int on_device = -1;
  int device = -1;
  CUDA_CHECK(cudaGetDevice(&device));
  if (buf && device == on_device && capacity >= bytes) return buf;
  if (buf && device == on_device) {
    CUDA_CHECK(cudaStreamSynchronize(stream()));  // queued work may still use the old buffer
    CUDA_CHECK(cudaFree(buf));
  }
  buf = nullptr;
  capacity = 0;
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&buf), bytes));
  on_device = device;
  capacity = bytes;
  return buf;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;  // every lane holds the total
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ int key_count(const int32_t* key_lengths, int b, int k_len) {
  if (!key_lengths) return k_len;
  const int l = key_lengths[b];
  return l < 0 ? 0 : (l > k_len ? k_len : l);
}

// ||v|| of the whole block (every thread gets it), in double with block_sum's fixed tree.
__device__ double block_norm(const float* v, int units) {
  double sq = 0.0;
  for (int a = int(threadIdx.x); a < units; a += kAttnThreads) sq += double(v[a]) * double(v[a]);
  return sqrt(block_sum(sq));
}

// vn and qb = qp row + bias into shared memory (qb skipped when null).
__device__ void load_vn_qb(AdditiveAttentionDims d, const float* qrow, const float* bias, const float* v,
                           const float* g, float* vn, float* qb) {
  const double norm = block_norm(v, d.units);
  const float scale = float(double(g[0]) / norm);
  for (int a = int(threadIdx.x); a < d.units; a += kAttnThreads) {
    vn[a] = scale * v[a];
    if (qb) qb[a] = qrow[a] + bias[a];
  }
  __syncthreads();
}

// Shared: vn [units], qb [units], p [k_len].
__global__ void __launch_bounds__(kAttnThreads)
    forward_kernel(AdditiveAttentionDims d, const float* __restrict__ qp, const float* __restrict__ kp,
                   const float* __restrict__ bias, const float* __restrict__ v, const float* __restrict__ g,
                   const float* __restrict__ values, const int32_t* __restrict__ key_lengths, float* __restrict__ probs,
                   float* __restrict__ context, int ld_context) {
  extern __shared__ float sh[];
  __shared__ float inv_sum;
  const int U = d.units, V = d.value_dim;
  float *vn = sh, *qb = sh + U, *p = sh + 2 * U;
  const size_t row = blockIdx.x;
  const int b = int(row / size_t(d.q_len));
  const int len = key_count(key_lengths, b, d.k_len);
  const float* kb = kp + size_t(b) * d.k_len * U;
  const float* vb = values + size_t(b) * d.k_len * V;
  load_vn_qb(d, qp + row * U, bias, v, g, vn, qb);
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  for (int j = warp; j < len; j += kWarps) {
    const float* k = kb + size_t(j) * U;
    float s = 0.0f;
    for (int a = lane; a < U; a += 32) s += vn[a] * tanhf(qb[a] + k[a]);
    s = warp_sum(s);
    if (lane == 0) p[j] = s;
  }
  __syncthreads();
  if (warp == 0) {
    float m = -INFINITY;
    for (int j = lane; j < len; j += 32) m = fmaxf(m, p[j]);
    m = warp_max(m);
    float sum = 0.0f;
    for (int j = lane; j < len; j += 32) {
      const float e = expf(p[j] - m);
      p[j] = e;
      sum += e;
    }
    sum = warp_sum(sum);
    if (lane == 0) inv_sum = len > 0 ? 1.0f / sum : 0.0f;
  }
  __syncthreads();
  for (int j = int(threadIdx.x); j < d.k_len; j += kAttnThreads) {
    const float pj = j < len ? p[j] * inv_sum : 0.0f;
    p[j] = pj;
    probs[row * d.k_len + j] = pj;
  }
  __syncthreads();
  for (int c = int(threadIdx.x); c < V; c += kAttnThreads) {
    float acc = 0.0f;
    for (int j = 0; j < len; ++j) acc += p[j] * vb[size_t(j) * V + c];
    context[row * size_t(ld_context) + c] = acc;
  }
}

// A. Shared: vn [units], qb [units], ds [k_len]. Writes ds_out [rows, k_len], dqp and dvn_part [rows, units].
__global__ void __launch_bounds__(kAttnThreads)
    backward_query_kernel(AdditiveAttentionDims d, const float* __restrict__ qp, const float* __restrict__ kp,
                          const float* __restrict__ bias, const float* __restrict__ v, const float* __restrict__ g,
                          const float* __restrict__ values, const int32_t* __restrict__ key_lengths,
                          const float* __restrict__ probs, const float* __restrict__ dcontext, int ld_context,
                          float* __restrict__ ds_out, float* __restrict__ dqp, float* __restrict__ dvn_part) {
  extern __shared__ float sh[];
  __shared__ float pdp_total;
  const int U = d.units, V = d.value_dim;
  float *vn = sh, *qb = sh + U, *ds = sh + 2 * U;
  const size_t row = blockIdx.x;
  const int b = int(row / size_t(d.q_len));
  const int len = key_count(key_lengths, b, d.k_len);
  const float* kb = kp + size_t(b) * d.k_len * U;
  const float* vb = values + size_t(b) * d.k_len * V;
  const float* p = probs + row * d.k_len;
  const float* dctx = dcontext + row * size_t(ld_context);
  load_vn_qb(d, qp + row * U, bias, v, g, vn, qb);
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  for (int j = warp; j < len; j += kWarps) {
    const float* val = vb + size_t(j) * V;
    float s = 0.0f;
    for (int c = lane; c < V; c += 32) s += dctx[c] * val[c];
    s = warp_sum(s);
    if (lane == 0) ds[j] = s;  // dp_j for now
  }
  __syncthreads();
  if (warp == 0) {
    float s = 0.0f;
    for (int j = lane; j < len; j += 32) s += p[j] * ds[j];
    s = warp_sum(s);
    if (lane == 0) pdp_total = s;
  }
  __syncthreads();
  for (int j = int(threadIdx.x); j < d.k_len; j += kAttnThreads) {
    const float s = j < len ? p[j] * (ds[j] - pdp_total) : 0.0f;
    ds[j] = s;
    ds_out[row * d.k_len + j] = s;
  }
  __syncthreads();
  for (int a = int(threadIdx.x); a < U; a += kAttnThreads) {
    const float q = qb[a], w = vn[a];
    float dq = 0.0f, dvn = 0.0f;
    for (int j = 0; j < len; ++j) {
      const float s = ds[j];
      if (s == 0.0f) continue;  // as the CPU: an underflowed probability sends nothing back
      const float th = tanhf(q + kb[size_t(j) * U + a]);
      dq += s * w * (1.0f - th * th);
      dvn += s * th;
    }
    dqp[row * U + a] = dq;
    dvn_part[row * U + a] = dvn;
  }
}

// B. Shared: vn [units]. One block per key row (b, j).
__global__ void __launch_bounds__(kAttnThreads)
    backward_key_kernel(AdditiveAttentionDims d, const float* __restrict__ qp, const float* __restrict__ kp,
                        const float* __restrict__ bias, const float* __restrict__ v, const float* __restrict__ g,
                        const int32_t* __restrict__ key_lengths, const float* __restrict__ probs,
                        const float* __restrict__ dcontext, int ld_context, const float* __restrict__ ds,
                        float* __restrict__ dkp, float* __restrict__ dvalues) {
  extern __shared__ float sh[];
  const int U = d.units, V = d.value_dim;
  float* vn = sh;
  const size_t krow = blockIdx.x;
  const int b = int(krow / size_t(d.k_len)), j = int(krow % size_t(d.k_len));
  const bool masked = j >= key_count(key_lengths, b, d.k_len);
  float* dk = dkp + krow * U;
  float* dval = dvalues + krow * V;
  if (masked) {  // uniform over the block: it leaves before any barrier
    for (int a = int(threadIdx.x); a < U; a += kAttnThreads) dk[a] = 0.0f;
    for (int c = int(threadIdx.x); c < V; c += kAttnThreads) dval[c] = 0.0f;
    return;
  }
  load_vn_qb(d, nullptr, bias, v, g, vn, nullptr);
  const size_t row0 = size_t(b) * d.q_len;
  for (int a = int(threadIdx.x); a < U; a += kAttnThreads) {
    const float k = kp[krow * U + a], ba = bias[a];
    float acc = 0.0f;
    for (int i = 0; i < d.q_len; ++i) {
      const float s = ds[(row0 + i) * d.k_len + j];
      if (s == 0.0f) continue;
      const float th = tanhf((qp[(row0 + i) * U + a] + ba) + k);
      acc += s * (1.0f - th * th);
    }
    dk[a] = vn[a] * acc;
  }
  for (int c = int(threadIdx.x); c < V; c += kAttnThreads) {
    float acc = 0.0f;
    for (int i = 0; i < d.q_len; ++i)
      acc += probs[(row0 + i) * d.k_len + j] * dcontext[(row0 + i) * size_t(ld_context) + c];
    dval[c] = acc;
  }
}

// C. sums[a] = sum over rows of x[row, a] and sums[units + a] likewise for y, in double.
// Block: kColTile units by kColLanes row lanes.
__global__ void column_sums_kernel(const float* __restrict__ x, const float* __restrict__ y, int64_t rows, int units,
                                   double* __restrict__ sums) {
  __shared__ double sx[kColLanes][kColTile], sy[kColLanes][kColTile];
  const int tx = int(threadIdx.x), ty = int(threadIdx.y);
  const int a = int(blockIdx.x) * kColTile + tx;
  double s1 = 0.0, s2 = 0.0;
  if (a < units)
    for (int64_t r = ty; r < rows; r += kColLanes) {
      s1 += double(x[size_t(r) * units + a]);
      s2 += double(y[size_t(r) * units + a]);
    }
  sx[ty][tx] = s1;
  sy[ty][tx] = s2;
  __syncthreads();
  for (int half = kColLanes / 2; half > 0; half /= 2) {
    if (ty < half) {
      sx[ty][tx] += sx[ty + half][tx];
      sy[ty][tx] += sy[ty + half][tx];
    }
    __syncthreads();
  }
  if (ty == 0 && a < units) {
    sums[a] = sx[0][tx];
    sums[units + a] = sy[0][tx];
  }
}

// D. One block: the parameter gradients from the column sums (dqp's -> dbias, d(vn)'s -> dv, dg).
__global__ void __launch_bounds__(kAttnThreads)
    finalize_kernel(int units, const float* __restrict__ v, const float* __restrict__ g,
                    const double* __restrict__ sums, float* __restrict__ dbias, float* __restrict__ dv,
                    float* __restrict__ dg) {
  const double norm = block_norm(v, units);
  const double* dvn = sums + units;
  double udv = 0.0;
  for (int a = int(threadIdx.x); a < units; a += kAttnThreads) udv += double(v[a]) / norm * dvn[a];
  udv = block_sum(udv);
  const double gn = double(g[0]) / norm;
  for (int a = int(threadIdx.x); a < units; a += kAttnThreads) {
    dbias[a] += float(sums[a]);
    dv[a] += float(gn * (dvn[a] - double(v[a]) / norm * udv));
  }
  if (threadIdx.x == 0) dg[0] += float(udv);
}

size_t checked_shared(size_t floats) {
  const size_t bytes = floats * sizeof(float);
  if (bytes > kMaxShared)
    fail(__FILE__, __LINE__, "additive_attention", "units and k_len too large for one block's shared memory");
  return bytes;
}

}  // namespace

void additive_attention_forward(const AdditiveAttentionDims& d, const float* qp, const float* kp, const float* bias,
                                const float* v, const float* g, const float* values, const int32_t* key_lengths,
                                float* probs, float* context, int ld_context) {
  const size_t rows = size_t(d.batch) * size_t(d.q_len);
  if (rows == 0) return;
  const size_t shared = checked_shared(2 * size_t(d.units) + size_t(d.k_len));
  forward_kernel<<<unsigned(rows), kAttnThreads, shared, stream()>>>(d, qp, kp, bias, v, g, values, key_lengths,
                                                                     probs, context, ld_context);
  CUDA_CHECK_LAUNCH();
}

void additive_attention_backward(const AdditiveAttentionDims& d, const float* qp, const float* kp, const float* bias,
                                 const float* v, const float* g, const float* values, const int32_t* key_lengths,
                                 const float* probs, const float* dcontext, int ld_context, float* dqp, float* dkp,
                                 float* dvalues, float* dbias, float* dv, float* dg) {
  const size_t rows = size_t(d.batch) * size_t(d.q_len), krows = size_t(d.batch) * size_t(d.k_len);
  const size_t U = size_t(d.units);
  // Scratch: column sums [2 * units] doubles, then ds [rows, k_len] and dvn_part [rows, units] floats.
  char* scratch = scratch_buffer(2 * U * sizeof(double) + (rows * size_t(d.k_len) + rows * U) * sizeof(float) + 16);
  double* sums = reinterpret_cast<double*>(scratch);
  float* ds = reinterpret_cast<float*>(sums + 2 * U);
  float* dvn_part = ds + rows * size_t(d.k_len);
  if (rows > 0) {
    backward_query_kernel<<<unsigned(rows), kAttnThreads, checked_shared(2 * U + size_t(d.k_len)), stream()>>>(
        d, qp, kp, bias, v, g, values, key_lengths, probs, dcontext, ld_context, ds, dqp, dvn_part);
    CUDA_CHECK_LAUNCH();
  }
  if (krows > 0) {
    backward_key_kernel<<<unsigned(krows), kAttnThreads, checked_shared(U), stream()>>>(
        d, qp, kp, bias, v, g, key_lengths, probs, dcontext, ld_context, ds, dkp, dvalues);
    CUDA_CHECK_LAUNCH();
  }
  if (U == 0) return;
  column_sums_kernel<<<unsigned((U + kColTile - 1) / kColTile), dim3(kColTile, kColLanes), 0, stream()>>>(
      dqp, dvn_part, int64_t(rows), d.units, sums);
  CUDA_CHECK_LAUNCH();
  finalize_kernel<<<1, kAttnThreads, 0, stream()>>>(d.units, v, g, sums, dbias, dv, dg);
  CUDA_CHECK_LAUNCH();
}

}  // namespace mlpd::cuda
