// Token embedding with fairseq's sinusoidal positions on the GPU.
// Forward: one thread per output float; the position encoding is computed in double as on the CPU
// (kernels/cpu/token_embedding.cpp, the same host-computed frequency step), then rounded to float.
// Backward: deterministic and in the CPU's order without float atomics, as embedding_scatter_add
// (kernels/cuda/embedding.cu): a stable radix sort of the tokens (cub) groups the occurrences of
// each table row in increasing r, and one thread per (row, column) adds them in that order.
#include <cub/device/device_radix_sort.cuh>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mlpd::cuda {

namespace {

__global__ void token_embedding_forward_kernel(const float* __restrict__ table, int dim,
                                               const int32_t* __restrict__ tokens, int len, size_t total,
                                               float scale, int pos_offset, bool add_positions, int half,
                                               double step, float* __restrict__ out) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const size_t r = e / size_t(dim);
    const int j = int(e % size_t(dim));
    float val = scale * table[size_t(tokens[r]) * size_t(dim) + j];
    if (add_positions && j < 2 * half) {
      const int i = j < half ? j : j - half;
      const double angle = double(pos_offset + int(r % size_t(len))) * exp(-double(i) * step);
      val += float(j < half ? sin(angle) : cos(angle));
    }
    out[e] = val;
  }
}

__global__ void iota_kernel(int32_t* order, int n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < size_t(n); i += stride) order[i] = int32_t(i);
}

// keys: the tokens sorted; order: their positions r, increasing within a run of equal tokens. The
// thread of (sorted position s, column j) works only where s starts a run, adding the run's rows of
// dout (times scale) in increasing r onto dtable[token, j], as the CPU loop does.
__global__ void add_sorted_runs_kernel(float* __restrict__ dtable, int dim, const int32_t* __restrict__ keys,
                                       const int32_t* __restrict__ order, int n, float scale,
                                       const float* __restrict__ dout) {
  const size_t total = size_t(n) * size_t(dim);
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const int s = int(e / size_t(dim));
    const size_t j = e % size_t(dim);
    const int32_t row = keys[s];
    if (s > 0 && keys[s - 1] == row) continue;  // inside a run: its first thread does the work
    float* dst = dtable + size_t(row) * size_t(dim) + j;
    float acc = *dst;
    for (int t = s; t < n && keys[t] == row; ++t) acc += scale * dout[size_t(order[t]) * size_t(dim) + j];
    *dst = acc;
  }
}

size_t align_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

// Device scratch of the sort, grown to the largest call so far; one GPU per process (a process
// that switches GPUs gets a new buffer and leaves the old one behind).
struct SortScratch {
  void* base = nullptr;
  size_t bytes = 0;
  int device = -1;
};

void* sort_scratch(size_t need) {
  static SortScratch s;
  int device = -1;
  CUDA_CHECK(cudaGetDevice(&device));
  if (s.device != device) s = SortScratch{};
  if (need > s.bytes) {
    if (s.base) {
      CUDA_CHECK(cudaStreamSynchronize(stream()));  // no queued kernel still uses the old buffer
      void* old = s.base;
      s = SortScratch{};  // forget it before anything can throw
      CUDA_CHECK(cudaFree(old));
    }
    const size_t bytes = need + need / 4;  // headroom: the number of tokens varies a little
    CUDA_CHECK(cudaMalloc(&s.base, bytes));
    s.bytes = bytes;
    s.device = device;
  }
  return s.base;
}

}  // namespace

void token_embedding_forward(const float* table, int dim, const int32_t* tokens, int batch, int len, float scale,
                             int pos_offset, bool add_positions, float* out) {
  if (dim <= 0 || batch <= 0 || len <= 0) return;
  const int half = dim / 2;
  const double step = half > 1 ? std::log(10000.0) / double(half - 1) : 0.0;  // as the CPU's
  const size_t total = size_t(batch) * size_t(len) * size_t(dim);
  token_embedding_forward_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(
      table, dim, tokens, len, total, scale, pos_offset, add_positions, half, step, out);
  CUDA_CHECK_LAUNCH();
}

void token_embedding_backward(float* dtable, int dim, const int32_t* tokens, int n, float scale, const float* dout) {
  if (n <= 0 || dim <= 0) return;
  // Scratch layout: sorted keys [n], order in [n], order out [n], cub's temporary storage.
  size_t temp_bytes = 0;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, static_cast<const int32_t*>(nullptr),
                                             static_cast<int32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                             static_cast<int32_t*>(nullptr), n, 0, 32, stream()));
  const size_t list = align_up(sizeof(int32_t) * size_t(n));
  auto* base = static_cast<char*>(sort_scratch(3 * list + align_up(temp_bytes)));
  auto* keys = reinterpret_cast<int32_t*>(base);
  auto* order_in = reinterpret_cast<int32_t*>(base + list);
  auto* order = reinterpret_cast<int32_t*>(base + 2 * list);
  void* temp = base + 3 * list;

  iota_kernel<<<blocks_for(size_t(n)), kThreads, 0, stream()>>>(order_in, n);
  CUDA_CHECK_LAUNCH();
  // LSD radix sort is stable: equal tokens keep their increasing positions r.
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, tokens, keys, order_in, order, n, 0, 32, stream()));
  const size_t total = size_t(n) * size_t(dim);
  add_sorted_runs_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(dtable, dim, keys, order, n, scale, dout);
  CUDA_CHECK_LAUNCH();
}

}  // namespace mlpd::cuda
