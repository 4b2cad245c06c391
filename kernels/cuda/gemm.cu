// Row-major GEMM on cuBLAS, which is column-major. A row-major matrix read as column-major is its
// transpose, so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T by swapping the operands:
// no copies and no transposes. The handle stays in fp32 math (no TF32, kernels/cuda/runtime.cu)
// so results compare with the CPU's at fp32 tolerance, except while a bf16 op runs
// (set_tensor_core_math).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mlpd::cuda {

namespace {

// C = beta * C for an empty product (k == 0), which cuBLAS is not asked to handle. beta == 0
// writes exact zeros (even over NaN), as the CPU version does.
__global__ void scale_matrix_kernel(float* c, int m, int n, int ldc, float beta) {
  const size_t total = size_t(m) * n;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    float* p = c + (i / n) * ldc + i % n;
    *p = beta == 0.0f ? 0.0f : beta * *p;
  }
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    scale_matrix_kernel<<<blocks_for(size_t(m) * n), kThreads, 0, stream()>>>(c, m, n, ldc, beta);
    CUDA_CHECK_LAUNCH();
    return;
  }
  // Column-major view: C^T [n x m] = op(B)^T [n x k] * op(A)^T [k x m]. The buffer of a row-major
  // B (not transposed) is B^T column-major, which is what op(B)^T asks for: CUBLAS_OP_N.
  CUBLAS_CHECK(cublasSgemm(blas(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m,
                           k, &alpha, b, ldb, a, lda, &beta, c, ldc));
}

// bf16 operands, fp32 sums and C (CUBLAS_COMPUTE_32F): cuBLAS runs it on the bf16 tensor cores,
// twice the TF32 rate, whatever the handle's math mode. The same operand swap as gemm.
void gemm_bf16(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const uint16_t* a, int lda,
               const uint16_t* b, int ldb, float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    gemm(trans_a, trans_b, m, n, 0, alpha, nullptr, 1, nullptr, 1, beta, c, ldc);
    return;
  }
  CUBLAS_CHECK(cublasGemmEx(blas(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m,
                            k, &alpha, b, CUDA_R_16BF, ldb, a, CUDA_R_16BF, lda, &beta, c, CUDA_R_32F, ldc,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace mlpd::cuda
