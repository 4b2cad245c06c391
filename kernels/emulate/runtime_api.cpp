// The emulator's host side: the CUDA runtime and cuBLAS calls kernels/cuda makes, on the CPU.
// Eight devices, "device" memory from the heap, every stream synchronous (work runs when queued, so
// events are always complete). It checks what a GPU would refuse: a copy whose device side is not
// inside one cudaMalloc allocation, a free of something never allocated, a bad launch (threads.cpp).
#include <cblas.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <dlfcn.h>
#include <unistd.h>
#include <execinfo.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <mutex>
#include <vector>

#include "kernels/emulate/runtime_state.h"

namespace mlpd_emulate {

namespace {

std::mutex g_mutex;
std::map<uintptr_t, size_t> g_allocations;  // device allocations: start -> bytes
std::map<uintptr_t, size_t> g_pinned;       // cudaMallocHost allocations: start -> bytes
cudaError_t g_last_error = cudaSuccess;
size_t g_max_dynamic_shared = 48 * 1024;

bool inside(const std::map<uintptr_t, size_t>& allocations, const void* p, size_t bytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = allocations.upper_bound(a);
  if (it == allocations.begin()) return false;
  --it;
  return a >= it->first && a + bytes <= it->first + it->second;
}

bool inside_allocation(const void* p, size_t bytes) { return inside(g_allocations, p, bytes); }

cudaError_t fail(cudaError_t e) {
  g_last_error = e;
  return e;
}

// A host wait: a call on which a GPU's host would wait for queued work (a stream, event or device
// synchronize, a copy to pageable host memory) with work queued since the last one. A GPU idles
// while its host waits, and then while the host queues the next work: this is how waits per step
// are counted here (bench_train prints them; mlpd_emulate_host_waits below). With
// MLPD_EMULATE_HOST_WAITS set, each is also counted by its call stack and the sites are printed at
// exit as module+offset (addr2line -f -C -e MODULE OFFSET names them).
std::atomic<bool> g_work_queued{false};  // NCCL's calls may come from the communicator's thread
std::atomic<long> g_host_waits{0};

struct WaitSites {
  std::map<std::vector<void*>, long> counts;
  // To stderr; or, where MLPD_EMULATE_HOST_WAITS names a directory, to waits.<pid>.txt there (the
  // ranks of an mpirun would interleave their lines on stderr).
  ~WaitSites() {
    const char* dir = std::getenv("MLPD_EMULATE_HOST_WAITS");
    FILE* out = stderr;
    if (dir && std::strcmp(dir, "1") != 0) {
      const std::string path = std::string(dir) + "/waits." + std::to_string(getpid()) + ".txt";
      if (FILE* f = std::fopen(path.c_str(), "w")) out = f;
    }
    for (const auto& [stack, count] : counts) {
      std::fprintf(out, "cuda emulator: wait site %ld", count);
      for (void* frame : stack) {
        Dl_info info{};
        if (dladdr(frame, &info) && info.dli_fname)
          std::fprintf(out, " %s+0x%lx", info.dli_fname,
                       static_cast<unsigned long>(reinterpret_cast<uintptr_t>(frame) -
                                                  reinterpret_cast<uintptr_t>(info.dli_fbase) - 1));
      }
      std::fprintf(out, "\n");
    }
    if (out != stderr) std::fclose(out);
  }
};

void count_host_wait() {
  if (!g_work_queued.exchange(false)) return;
  ++g_host_waits;
  static const bool by_site = std::getenv("MLPD_EMULATE_HOST_WAITS") != nullptr;
  if (!by_site) return;
  static WaitSites sites;
  void* frames[10];
  const int n = backtrace(frames, 10);
  std::lock_guard<std::mutex> lock(g_mutex);
  ++sites.counts[std::vector<void*>(frames + std::min(n, 2), frames + n)];  // not this function nor its caller
}

}  // namespace

void die(const char* what) {
  std::fprintf(stderr, "cuda emulator: %s\n", what);
  std::abort();
}
void set_last_error(cudaError_t e) { g_last_error = e; }
void note_queued_work() { g_work_queued = true; }
size_t max_dynamic_shared_bytes() { return g_max_dynamic_shared; }
bool is_device_range(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return inside_allocation(p, bytes);
}

void check_kernel_pointer(const void* p, int argument) {
  std::lock_guard<std::mutex> lock(g_mutex);
  // bytes 0: one past the end of an allocation is a valid argument (an empty range's start).
  if (inside(g_allocations, p, 0) || inside(g_pinned, p, 0)) return;
  char msg[160];
  std::snprintf(msg, sizeof msg, "kernel argument %d is a host pointer (%p): a GPU cannot read it", argument, p);
  die(msg);
}

}  // namespace mlpd_emulate

// The host waits counted so far (see count_host_wait): a program built against the emulator may
// declare it weak and read it; on a GPU it is absent.
extern "C" long mlpd_emulate_host_waits() { return mlpd_emulate::g_host_waits.load(); }

using mlpd_emulate::fail;
using mlpd_emulate::g_allocations;
using mlpd_emulate::g_mutex;

// ---------------------------------- devices ----------------------------------

// Eight devices, as on a GPU node, so that ranks on one host each get their own (each process
// emulates the one it opens; MLPD_EMULATE_GPUS sets another count).
namespace {
int g_device = 0;
int emulated_devices() {
  static const int n = [] {
    const char* v = std::getenv("MLPD_EMULATE_GPUS");
    return v && std::atoi(v) >= 0 ? std::atoi(v) : 8;
  }();
  return n;
}
}  // namespace

cudaError_t cudaGetDeviceCount(int* count) {
  *count = emulated_devices();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= emulated_devices()) return fail(cudaErrorInvalidDevice);
  g_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = g_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device < 0 || device >= emulated_devices()) return fail(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "CUDA emulator (CPU)");
  prop->major = 9;
  prop->minor = 0;
  prop->totalGlobalMem = size_t(16) << 30;
  prop->multiProcessorCount = 1;
  prop->maxThreadsPerBlock = 1024;
  prop->warpSize = 32;
  prop->sharedMemPerBlock = 48 * 1024;
  prop->sharedMemPerBlockOptin = 227 * 1024;
  return cudaSuccess;
}

// The clocks bench/kernels_cuda turns into a peak: an emulated device has none, so 0 (the bench
// then prints no fraction of a peak, as for a device it cannot rate).
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr, int device) {
  if (device < 0 || device >= emulated_devices()) return fail(cudaErrorInvalidDevice);
  *value = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  mlpd_emulate::count_host_wait();
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = mlpd_emulate::g_last_error;
  mlpd_emulate::g_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() { return mlpd_emulate::g_last_error; }

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument (emulator)";
    case cudaErrorMemoryAllocation: return "out of memory (emulator)";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument (emulator)";
    case cudaErrorInvalidDevice: return "invalid device ordinal (emulator)";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer (emulator)";
    case cudaErrorNotReady: return "device not ready (emulator)";
    default: return "error (emulator)";
  }
}

cudaError_t cudaFuncSetAttribute(const void*, cudaFuncAttribute attr, int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || value > 227 * 1024) return fail(cudaErrorInvalidValue);
    mlpd_emulate::g_max_dynamic_shared = std::max(mlpd_emulate::g_max_dynamic_shared, size_t(value));
  }
  return cudaSuccess;
}

// ---------------------------------- memory ----------------------------------

cudaError_t cudaMalloc(void** p, size_t bytes) {
  // Garbage, not zeros: a GPU's fresh memory holds whatever was there.
  void* q = std::aligned_alloc(256, std::max<size_t>(256, (bytes + 255) / 256 * 256));
  if (!q) return fail(cudaErrorMemoryAllocation);
  std::memset(q, 0x5A, bytes);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_allocations[reinterpret_cast<uintptr_t>(q)] = bytes;
  *p = q;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == g_allocations.end()) return fail(cudaErrorInvalidDevicePointer);
  g_allocations.erase(it);
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, size_t bytes) {
  *p = std::aligned_alloc(256, std::max<size_t>(256, (bytes + 255) / 256 * 256));
  if (!*p) return fail(cudaErrorMemoryAllocation);
  std::lock_guard<std::mutex> lock(g_mutex);
  mlpd_emulate::g_pinned[reinterpret_cast<uintptr_t>(*p)] = bytes;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* p) {
  if (!p) return cudaSuccess;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (mlpd_emulate::g_pinned.erase(reinterpret_cast<uintptr_t>(p)) == 0) return fail(cudaErrorInvalidValue);
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    const bool dst_dev = mlpd_emulate::inside_allocation(dst, bytes), src_dev = mlpd_emulate::inside_allocation(src, bytes);
    bool ok = true;
    switch (kind) {
      case cudaMemcpyHostToDevice: ok = dst_dev && !src_dev; break;
      case cudaMemcpyDeviceToHost: ok = src_dev && !dst_dev; break;
      case cudaMemcpyDeviceToDevice: ok = src_dev && dst_dev; break;
      default: break;
    }
    if (!ok) return fail(cudaErrorInvalidValue);
  }
  // A GPU's host waits for a copy into pageable memory, and for every cudaMemcpy: for the work queued
  // before it (the copy itself, once the device is idle, is no drain).
  if (!stream || (kind == cudaMemcpyDeviceToHost && !mlpd_emulate::inside(mlpd_emulate::g_pinned, dst, bytes)))
    mlpd_emulate::count_host_wait();
  else
    mlpd_emulate::note_queued_work();
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t) {
  if (bytes == 0) return cudaSuccess;
  if (!mlpd_emulate::is_device_range(p, bytes)) return fail(cudaErrorInvalidValue);
  mlpd_emulate::note_queued_work();
  std::memset(p, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemset(void* p, int value, size_t bytes) { return cudaMemsetAsync(p, value, bytes, nullptr); }

// ---------------------------------- streams and events ----------------------------------
// Work runs when it is queued: a stream is a token, an event is always complete.

namespace {
int g_stream_token, g_event_token;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  *s = reinterpret_cast<cudaStream_t>(&g_stream_token);
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, 0); }
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) {
  mlpd_emulate::count_host_wait();
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
  *e = reinterpret_cast<cudaEvent_t>(&g_event_token);
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaEventQuery(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventSynchronize(cudaEvent_t) {
  mlpd_emulate::count_host_wait();
  return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) {
  *ms = 0.0f;  // the emulator has no device clock
  return cudaSuccess;
}

// ---------------------------------- cuBLAS ----------------------------------
// Column-major, as cuBLAS: OpenBLAS's sgemm/sgemv (fp32 sums, as the GPU's fp32 math), bf16
// operands widened to fp32 first.

namespace {

int g_blas_token;

// op(M) of a column-major operand as fp32: the operand itself, or its bf16 values widened.
const float* as_floats(const void* m, cudaDataType t, int rows, int cols, int ld, std::vector<float>& widened) {
  if (t == CUDA_R_32F) return static_cast<const float*>(m);
  widened.assign(size_t(ld) * cols, 0.0f);  // CUDA_R_16BF
  const auto* h = static_cast<const uint16_t*>(m);
  for (int c = 0; c < cols; ++c)
    for (int r = 0; r < rows; ++r) {
      const uint32_t bits = uint32_t(h[size_t(c) * ld + r]) << 16;
      std::memcpy(&widened[size_t(c) * ld + r], &bits, 4);
    }
  return widened.data();
}

CBLAS_TRANSPOSE to_cblas(cublasOperation_t t) { return t == CUBLAS_OP_N ? CblasNoTrans : CblasTrans; }

// C[m, n] = alpha * op(A)[m, k] op(B)[k, n] + beta * C, every matrix column-major.
cublasStatus_t gemm_any(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha, const void* a,
                        cudaDataType at, int lda, const void* b, cudaDataType bt, int ldb, float beta, float* c,
                        int ldc) {
  if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
  const int a_rows = ta == CUBLAS_OP_N ? m : k, a_cols = ta == CUBLAS_OP_N ? k : m;
  const int b_rows = tb == CUBLAS_OP_N ? k : n, b_cols = tb == CUBLAS_OP_N ? n : k;
  if (lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) || ldc < std::max(1, m)) return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  mlpd_emulate::note_queued_work();
  std::vector<float> wa, wb;
  const float* fa = as_floats(a, at, a_rows, a_cols, lda, wa);
  const float* fb = as_floats(b, bt, b_rows, b_cols, ldb, wb);
  cblas_sgemm(CblasColMajor, to_cblas(ta), to_cblas(tb), m, n, k, alpha, fa, lda, fb, ldb, beta, c, ldc);
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

cublasStatus_t cublasCreate_v2(cublasHandle_t* h) {
  *h = reinterpret_cast<cublasHandle_t>(&g_blas_token);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetStream_v2(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }

cublasStatus_t cublasSgemm_v2(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const float* alpha, const float* a, int lda, const float* b, int ldb, const float* beta,
                              float* c, int ldc) {
  return gemm_any(ta, tb, m, n, k, *alpha, a, CUDA_R_32F, lda, b, CUDA_R_32F, ldb, *beta, c, ldc);
}

cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void* alpha, const void* a, cudaDataType at, int lda, const void* b, cudaDataType bt,
                            int ldb, const void* beta, void* c, cudaDataType ct, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t) {
  const auto known = [](cudaDataType t) { return t == CUDA_R_32F || t == CUDA_R_16BF; };
  if (!known(at) || !known(bt) || ct != CUDA_R_32F || compute != CUBLAS_COMPUTE_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  return gemm_any(ta, tb, m, n, k, *static_cast<const float*>(alpha), a, at, lda, b, bt, ldb,
                  *static_cast<const float*>(beta), static_cast<float*>(c), ldc);
}

cublasStatus_t cublasSgemv_v2(cublasHandle_t, cublasOperation_t t, int m, int n, const float* alpha, const float* a,
                              int lda, const float* x, int incx, const float* beta, float* y, int incy) {
  if (m < 0 || n < 0 || lda < std::max(1, m) || incx == 0 || incy == 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  mlpd_emulate::note_queued_work();
  cblas_sgemv(CblasColMajor, to_cblas(t), m, n, *alpha, a, lda, x, incx, *beta, y, incy);
  return CUBLAS_STATUS_SUCCESS;
}
