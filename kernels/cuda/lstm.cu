// The pointwise part of an LSTM step (gnmt) on the GPU, with the CPU's formulas
// (kernels/cpu/lstm.cpp; CUDA's expf and tanhf where the CPU has its vectorised ones): one thread per
// (row, unit), grid-stride; no reductions, so every run gives the same bits. Kept-state rows
// (lengths[r] <= t) copy their state forward and their gradients back.
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mlpd::cuda {

namespace {

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void lstm_forward_kernel(const float* __restrict__ gates, const float* c_prev, const float* h_prev,
                                    int ld_h_prev, int n, int hidden, const int32_t* __restrict__ lengths, int t,
                                    float* __restrict__ acts, float* c, float* h, int ld_h) {
  const size_t H = size_t(hidden), total = size_t(n) * H;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const size_t r = e / H, j = e % H;
    const float* gr = gates + r * 4 * H;
    float* ar = acts + r * 4 * H;
    const float i = sigmoid(gr[j]), f = sigmoid(gr[H + j]), g = tanhf(gr[2 * H + j]), o = sigmoid(gr[3 * H + j]);
    ar[j] = i;
    ar[H + j] = f;
    ar[2 * H + j] = g;
    ar[3 * H + j] = o;
    const float cp = c_prev[e];  // c may alias c_prev: each element is read before it is written
    if (lengths && lengths[r] <= t) {
      c[e] = cp;
      h[r * size_t(ld_h) + j] = h_prev[r * size_t(ld_h_prev) + j];
    } else {
      const float cn = f * cp + i * g;
      c[e] = cn;
      h[r * size_t(ld_h) + j] = o * tanhf(cn);
    }
  }
}

__global__ void lstm_backward_kernel(const float* __restrict__ acts, const float* __restrict__ c_prev,
                                     const float* __restrict__ c, const float* __restrict__ dh, int ld_dh,
                                     const float* dc, int n, int hidden, const int32_t* __restrict__ lengths, int t,
                                     float* __restrict__ dgates, float* dc_prev, float* __restrict__ dh_prev) {
  const size_t H = size_t(hidden), total = size_t(n) * H;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const size_t r = e / H, j = e % H;
    float* dgr = dgates + r * 4 * H;
    const float d = dh[r * size_t(ld_dh) + j];
    const float dcn = dc[e];  // dc_prev may alias dc
    if (lengths && lengths[r] <= t) {
      dgr[j] = dgr[H + j] = dgr[2 * H + j] = dgr[3 * H + j] = 0.0f;
      dc_prev[e] = dcn;
      dh_prev[e] = d;
      continue;
    }
    const float* ar = acts + r * 4 * H;
    const float i = ar[j], f = ar[H + j], g = ar[2 * H + j], o = ar[3 * H + j];
    const float th = tanhf(c[e]);
    const float dct = dcn + d * o * (1.0f - th * th);
    dgr[j] = dct * g * i * (1.0f - i);
    dgr[H + j] = dct * c_prev[e] * f * (1.0f - f);
    dgr[2 * H + j] = dct * i * (1.0f - g * g);
    dgr[3 * H + j] = d * th * o * (1.0f - o);
    dc_prev[e] = dct * f;
    dh_prev[e] = 0.0f;
  }
}

}  // namespace

void lstm_cell_forward(const float* gates, const float* c_prev, const float* h_prev, int ld_h_prev, int n,
                       int hidden, const int32_t* lengths, int t, float* acts, float* c, float* h, int ld_h) {
  const size_t total = size_t(n) * size_t(hidden);
  if (total == 0) return;
  lstm_forward_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(gates, c_prev, h_prev, ld_h_prev, n, hidden,
                                                                    lengths, t, acts, c, h, ld_h);
  CUDA_CHECK_LAUNCH();
}

void lstm_cell_backward(const float* acts, const float* c_prev, const float* c, const float* dh, int ld_dh,
                        const float* dc, int n, int hidden, const int32_t* lengths, int t, float* dgates,
                        float* dc_prev, float* dh_prev) {
  const size_t total = size_t(n) * size_t(hidden);
  if (total == 0) return;
  lstm_backward_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(acts, c_prev, c, dh, ld_dh, dc, n, hidden,
                                                                     lengths, t, dgates, dc_prev, dh_prev);
  CUDA_CHECK_LAUNCH();
}

}  // namespace mlpd::cuda
