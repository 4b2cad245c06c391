// What every kernels/cuda/*.cu file shares: the checks (file:line of the failed call in the
// message), the process's stream and handles (kernels/cuda/runtime.cu), and launch sizes.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#ifdef MLPD_HAVE_CUDNN
#include <cudnn.h>
#endif

namespace mlpd::cuda {

[[noreturn]] void fail(const char* file, int line, const char* call, const char* what);
const char* cublas_status_name(cublasStatus_t s);

cudaStream_t stream();
cublasHandle_t blas();
#ifdef MLPD_HAVE_CUDNN
cudnnHandle_t dnn();
#endif

constexpr unsigned kThreads = 256;
// Blocks for a grid-stride loop over n elements: enough to fill the GPU, never more than needed.
inline unsigned blocks_for(size_t n, unsigned threads = kThreads) {
  const size_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535u * 8 ? 65535u * 8 : b));
}

}  // namespace mlpd::cuda

#define CUDA_CHECK(call)                                                                   \
  do {                                                                                     \
    const cudaError_t mlpd_e_ = (call);                                                    \
    if (mlpd_e_ != cudaSuccess) ::mlpd::cuda::fail(__FILE__, __LINE__, #call, cudaGetErrorString(mlpd_e_)); \
  } while (0)
// After a kernel launch: launch-configuration errors surface here, faults at the next sync.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
#define CUBLAS_CHECK(call)                                                                 \
  do {                                                                                     \
    const cublasStatus_t mlpd_s_ = (call);                                                 \
    if (mlpd_s_ != CUBLAS_STATUS_SUCCESS)                                                  \
      ::mlpd::cuda::fail(__FILE__, __LINE__, #call, ::mlpd::cuda::cublas_status_name(mlpd_s_)); \
  } while (0)
#ifdef MLPD_HAVE_CUDNN
#define CUDNN_CHECK(call)                                                                  \
  do {                                                                                     \
    const cudnnStatus_t mlpd_s_ = (call);                                                  \
    if (mlpd_s_ != CUDNN_STATUS_SUCCESS) ::mlpd::cuda::fail(__FILE__, __LINE__, #call, cudnnGetErrorString(mlpd_s_)); \
  } while (0)
#endif
