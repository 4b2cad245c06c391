// bf16 rounding on the GPU (kernels/op_signatures.inc: bf16_round*, bf16_*pack_rows,
// relu_backward_bf16): grid-stride loops over the rounding of core/bf16.h, so both devices give the
// same bits.
#include <type_traits>

#include "core/bf16.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mlpd::cuda {

namespace {

__global__ void bf16_round_kernel(const float* x, float* y, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = round_to_bf16(x[i]);
}

// y[r * ld_y + c] = x[r * ld_x + c] rounded to bf16: as an fp32 (bf16_round_rows) or as its bits
// (bf16_pack_rows).
template <class Out>
__global__ void bf16_rows_kernel(const float* x, int rows, int width, int ld_x, Out* y, int ld_y) {
  const size_t total = size_t(rows) * width;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const size_t r = i / width, c = i % width;
    if constexpr (std::is_same_v<Out, float>)
      y[r * ld_y + c] = round_to_bf16(x[r * ld_x + c]);
    else
      y[r * ld_y + c] = f32_to_bf16(x[r * ld_x + c]);
  }
}

__global__ void bf16_unpack_kernel(const uint16_t* x, int rows, int width, int ld_x, float* y, int ld_y) {
  const size_t total = size_t(rows) * width;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const size_t r = i / width, c = i % width;
    y[r * ld_y + c] = bf16_to_f32(x[r * ld_x + c]);
  }
}

__global__ void relu_backward_bf16_kernel(const uint16_t* y16, const float* dy, float* dx, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dx[i] = bf16_to_f32(y16[i]) > 0.0f ? dy[i] : 0.0f;
}

template <class Out>
void bf16_rows(const float* x, int rows, int width, int ld_x, Out* y, int ld_y) {
  if (rows <= 0 || width <= 0) return;
  bf16_rows_kernel<Out><<<blocks_for(size_t(rows) * width), kThreads, 0, stream()>>>(x, rows, width, ld_x, y, ld_y);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void bf16_round(const float* x, float* y, size_t n) {
  if (n == 0) return;
  bf16_round_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(x, y, n);
  CUDA_CHECK_LAUNCH();
}

void bf16_round_rows(const float* x, int rows, int width, int ld_x, float* y, int ld_y) {
  bf16_rows(x, rows, width, ld_x, y, ld_y);
}

void bf16_pack_rows(const float* x, int rows, int width, int ld_x, uint16_t* y, int ld_y) {
  bf16_rows(x, rows, width, ld_x, y, ld_y);
}

void bf16_unpack_rows(const uint16_t* x, int rows, int width, int ld_x, float* y, int ld_y) {
  if (rows <= 0 || width <= 0) return;
  bf16_unpack_kernel<<<blocks_for(size_t(rows) * width), kThreads, 0, stream()>>>(x, rows, width, ld_x, y, ld_y);
  CUDA_CHECK_LAUNCH();
}

void relu_backward_bf16(const uint16_t* y16, const float* dy, float* dx, size_t n) {
  if (n == 0) return;
  relu_backward_bf16_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(y16, dy, dx, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace mlpd::cuda
