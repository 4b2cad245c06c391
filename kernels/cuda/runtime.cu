#include <cstdio>
#include <stdexcept>
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/runtime.h"

namespace mlpd::cuda {

namespace {
// One device per process (one rank per GPU): the state is the process's, not a thread's.
struct Runtime {
  int ordinal = -1;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
#ifdef MLPD_HAVE_CUDNN
  cudnnHandle_t dnn = nullptr;
#endif
};
Runtime g_rt;
bool g_tensor_core_math = false;

Runtime& opened() {
  if (g_rt.ordinal < 0) throw std::runtime_error("cuda: no device is open (open_device was not called)");
  return g_rt;
}
}  // namespace

void fail(const char* file, int line, const char* call, const char* what) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " + what);
}

const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "cuBLAS error";
  }
}

int device_count() {
  int n = 0;  // cudaGetDeviceCount leaves n untouched on error (no driver): keep 0
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "insufficient driver" error
    return 0;
  }
  return n;
}

int cudnn_version() {
#ifdef MLPD_HAVE_CUDNN
  return static_cast<int>(cudnnGetVersion());
#else
  return 0;
#endif
}

std::string open_device(int ordinal) {
  if (g_rt.ordinal != ordinal) {
    close_device();
    CUDA_CHECK(cudaSetDevice(ordinal));
    CUDA_CHECK(cudaStreamCreateWithFlags(&g_rt.stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&g_rt.blas));
    CUBLAS_CHECK(cublasSetStream(g_rt.blas, g_rt.stream));
    // fp32 GEMM stays fp32 (no TF32): CUDA results are compared with the CPU's at fp32 tolerance.
    CUBLAS_CHECK(cublasSetMathMode(g_rt.blas, CUBLAS_DEFAULT_MATH));
#ifdef MLPD_HAVE_CUDNN
    CUDNN_CHECK(cudnnCreate(&g_rt.dnn));
    CUDNN_CHECK(cudnnSetStream(g_rt.dnn, g_rt.stream));
#endif
    g_rt.ordinal = ordinal;
  }
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, ordinal));
  char mem[32];
  std::snprintf(mem, sizeof mem, "%.1f", static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " + mem + " GiB)";
}

void set_tensor_core_math(bool on) {
  g_tensor_core_math = on;
  if (g_rt.blas) CUBLAS_CHECK(cublasSetMathMode(g_rt.blas, on ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
}

bool tensor_core_math() { return g_tensor_core_math; }

void close_device() {
  if (g_rt.ordinal < 0) return;
  cudaStreamSynchronize(g_rt.stream);
#ifdef MLPD_HAVE_CUDNN
  if (g_rt.dnn) cudnnDestroy(g_rt.dnn);
#endif
  if (g_rt.blas) cublasDestroy(g_rt.blas);
  if (g_rt.stream) cudaStreamDestroy(g_rt.stream);
  g_rt = Runtime{};
}

bool device_open() { return g_rt.ordinal >= 0; }
void* compute_stream() { return opened().stream; }
cudaStream_t stream() { return opened().stream; }
cublasHandle_t blas() { return opened().blas; }
#ifdef MLPD_HAVE_CUDNN
cudnnHandle_t dnn() { return opened().dnn; }
#endif

void* malloc_zeroed(size_t bytes) {
  void* p = nullptr;
  if (bytes == 0) return nullptr;
  CUDA_CHECK(cudaMalloc(&p, bytes));
  CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream()));
  return p;
}
void free_device(void* p) {
  if (p) cudaFree(p);
}
void* malloc_pinned(size_t bytes) {
  void* p = nullptr;
  if (bytes == 0) return nullptr;
  CUDA_CHECK(cudaMallocHost(&p, bytes));
  return p;
}
void free_pinned(void* p) {
  if (p) cudaFreeHost(p);
}
void copy_to_device_async(void* dst, const void* src, size_t bytes) {
  if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()));
}
void copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream()));
  CUDA_CHECK(cudaStreamSynchronize(stream()));
}
void copy_on_device_async(void* dst, const void* src, size_t bytes) {
  if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()));
}
void zero_async(void* p, size_t bytes) {
  if (bytes) CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream()));
}
void synchronize() { CUDA_CHECK(cudaStreamSynchronize(stream())); }

}  // namespace mlpd::cuda
