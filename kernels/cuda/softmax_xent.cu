// Softmax cross-entropy with label smoothing on the GPU, forward and backward fused, with the
// CPU's arithmetic (kernels/cpu/softmax_xent.cpp: exp and the sums in double). One warp per
// sample: argmax, log-sum-exp and the gradient row. dlogits may be logits: lane 0's read of the
// label's logit comes before the warp's __syncwarp, the other reads of a row before the warp sums
// (shuffles every lane takes part in), and each lane overwrites only the elements it has just read
// (so neither pointer is __restrict__). The loss sum and the correct count must be
// the same bits every run, so there are no atomics: each warp writes its sample's loss and hit to
// a device buffer of this file (no arena is passed in; the buffer grows on the first calls and is
// then reused), and one block folds them in a fixed tree, adding the loss to the caller's sum on
// the device. The host waits only for a correct count (an evaluation's).
#include <math_constants.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mlpd::cuda {

namespace {

constexpr int kXentThreads = 256;  // 8 samples per block

struct Totals {
  double loss;
  int correct;
};

// The device buffer: the totals, then n per-sample losses, then n per-sample hits. One GPU per
// process; a process that switches GPUs gets a new buffer and leaves the old one behind.
struct SampleBuffers {
  Totals* totals;
  double* loss;
  int* correct;
};

SampleBuffers sample_buffers(int n) {
  static char* buf = nullptr;
  static size_t capacity = 0;
  static int on_device = -1;
  constexpr size_t kHead = 64;  // Totals, padded so the doubles after it stay aligned
  const size_t bytes = kHead + size_t(n) * (sizeof(double) + sizeof(int));
  int device = -1;
  CUDA_CHECK(cudaGetDevice(&device));
  if (!(buf && device == on_device && capacity >= bytes)) {
    if (buf && device == on_device) {
      CUDA_CHECK(cudaStreamSynchronize(stream()));  // queued work may still use the old buffer
      CUDA_CHECK(cudaFree(buf));
    }
    buf = nullptr;
    capacity = 0;
    CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&buf), bytes));
    on_device = device;
    capacity = bytes;
  }
  SampleBuffers b;
  b.totals = reinterpret_cast<Totals*>(buf);
  b.loss = reinterpret_cast<double*>(buf + kHead);
  b.correct = reinterpret_cast<int*>(buf + kHead + size_t(n) * sizeof(double));
  return b;
}

// Warp-wide sum in a fixed tree, broadcast from lane 0 so every lane holds the same bits.
__device__ __forceinline__ double warp_sum(double v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return __shfl_sync(0xffffffffu, v, 0);
}

// off = ls / classes, on = 1 - ls + off: the smoothed target is on at the label, off elsewhere.
__global__ void __launch_bounds__(kXentThreads)
    softmax_xent_kernel(const float* logits, const int32_t* __restrict__ labels, int n, int classes,
                        double off, double on, float grad_scale, float* dlogits,
                        double* __restrict__ sample_loss, int* __restrict__ sample_correct) {
  const int sample = int((size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32);
  if (sample >= n) return;  // the whole warp leaves together
  const int lane = int(threadIdx.x) % 32;
  const float* z = logits + size_t(sample) * classes;

  // Argmax, first maximum: each lane scans its classes in order, then the lanes are merged
  // preferring the larger value and, on a tie, the smaller index (lane -1: no class seen).
  float best = 0.0f;
  int arg = -1;
  for (int j = lane; j < classes; j += 32) {
    const float v = z[j];
    if (arg < 0 || v > best) {
      best = v;
      arg = j;
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other_best = __shfl_down_sync(0xffffffffu, best, offset);
    const int other_arg = __shfl_down_sync(0xffffffffu, arg, offset);
    if (other_arg >= 0 && (arg < 0 || other_best > best || (other_best == best && other_arg < arg))) {
      best = other_best;
      arg = other_arg;
    }
  }
  arg = __shfl_sync(0xffffffffu, arg, 0);

  const double zmax = z[arg];
  double sum = 0.0, sum_z = 0.0;
  for (int j = lane; j < classes; j += 32) {
    const double zj = z[j];
    sum += exp(zj - zmax);
    sum_z += zj;
  }
  sum = warp_sum(sum);
  sum_z = warp_sum(sum_z);
  const double log_sum = log(sum) + zmax;  // log sum exp
  const int label = labels[sample];
  if (lane == 0) {
    // A label out of range reads no memory and makes the loss NaN, which the log shows.
    const double z_label = label >= 0 && label < classes ? double(z[label]) : CUDART_NAN;
    // loss = -sum_j t_j (z_j - lse) = lse - off*sum_z - (on - off)*z_label
    sample_loss[sample] = log_sum - off * sum_z - (on - off) * z_label;
    sample_correct[sample] = arg == label ? 1 : 0;
  }
  __syncwarp();  // lane 0 has read z[label] before any lane overwrites the row in place
  if (dlogits) {
    float* g = dlogits + size_t(sample) * classes;
    for (int j = lane; j < classes; j += 32) {
      const double p = exp(double(z[j]) - log_sum);
      g[j] = float((p - (j == label ? on : off)) * grad_scale);
    }
  }
}

// One block: the totals of the per-sample losses and hits, in a fixed tree; the loss added to
// *loss_sum where given.
__global__ void __launch_bounds__(kXentThreads)
    fold_samples_kernel(const double* __restrict__ sample_loss, const int* __restrict__ sample_correct, int n,
                        Totals* __restrict__ totals, double* __restrict__ loss_sum) {
  __shared__ double loss[kXentThreads];
  __shared__ int hits[kXentThreads];
  double l = 0.0;
  int h = 0;
  for (int i = int(threadIdx.x); i < n; i += kXentThreads) {
    l += sample_loss[i];
    h += sample_correct[i];
  }
  loss[threadIdx.x] = l;
  hits[threadIdx.x] = h;
  __syncthreads();
  for (int half = kXentThreads / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half) {
      loss[threadIdx.x] += loss[threadIdx.x + half];
      hits[threadIdx.x] += hits[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    totals->loss = loss[0];
    totals->correct = hits[0];
    if (loss_sum) *loss_sum += loss[0];
  }
}

}  // namespace

void softmax_xent(const float* logits, const int32_t* labels, int n, int classes, float label_smoothing,
                  float grad_scale, float* dlogits, double* loss_sum, int* correct) {
  if (n <= 0 || classes <= 0) {
    if (correct) *correct = 0;
    return;
  }
  const double off = double(label_smoothing) / classes;
  const double on = 1.0 - double(label_smoothing) + off;
  const SampleBuffers b = sample_buffers(n);
  const unsigned blocks = unsigned((size_t(n) * 32 + kXentThreads - 1) / kXentThreads);
  softmax_xent_kernel<<<blocks, kXentThreads, 0, stream()>>>(logits, labels, n, classes, off, on, grad_scale, dlogits,
                                                             b.loss, b.correct);
  CUDA_CHECK_LAUNCH();
  fold_samples_kernel<<<1, kXentThreads, 0, stream()>>>(b.loss, b.correct, n, b.totals, loss_sum);
  CUDA_CHECK_LAUNCH();
  if (!correct) return;
  CUDA_CHECK(cudaMemcpyAsync(correct, &b.totals->correct, sizeof(int), cudaMemcpyDeviceToHost, stream()));
  CUDA_CHECK(cudaStreamSynchronize(stream()));
}

}  // namespace mlpd::cuda
