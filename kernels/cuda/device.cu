#include <cuda_runtime.h>
#include <nccl.h>

#include "kernels/cuda/device.h"

#if __has_include(<cudnn.h>)
#include <cudnn.h>
#define MLPD_HAVE_CUDNN 1
#endif

namespace mlpd::cuda {

int device_count() {
  int n = 0;  // cudaGetDeviceCount leaves n untouched on error (no driver): keep 0
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

int nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return 0;
  return v;
}

int cudnn_version() {
#ifdef MLPD_HAVE_CUDNN
  return static_cast<int>(cudnnGetVersion());
#else
  return 0;
#endif
}

}  // namespace mlpd::cuda
