// Embedding lookups on the GPU. The gather is a copy, one thread per output float. The scatter-add
// must be deterministic and give the CPU's bits (kernels/cpu/embedding.cpp adds repeated rows in
// order of i), so it does not use float atomics: a stable radix sort of the indices (cub) groups
// the occurrences of each row in increasing i, and one thread per (row, column) adds them in that
// order onto the table's value, the same additions in the same order as the CPU loop.
#include <cub/device/device_radix_sort.cuh>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mlpd::cuda {

namespace {

__global__ void gather_rows(const float* __restrict__ table, int dim, const int32_t* __restrict__ idx, int n,
                            float* __restrict__ out, int ld_out) {
  const size_t total = size_t(n) * size_t(dim);
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const size_t i = e / size_t(dim), j = e % size_t(dim);
    out[i * size_t(ld_out) + j] = table[size_t(idx[i]) * size_t(dim) + j];
  }
}

// order[i] = i: the values sorted along with the indices.
__global__ void iota(int32_t* order, int n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < size_t(n); i += stride) order[i] = int32_t(i);
}

// keys: the indices sorted; order: their positions i, increasing within a run of equal keys.
// The thread of (sorted position k, column j) works only where k starts a run: it adds the run's
// source rows, in increasing i, onto dtable[key, j].
__global__ void add_sorted_runs(float* __restrict__ dtable, int dim, const int32_t* __restrict__ keys,
                                const int32_t* __restrict__ order, int n, const float* __restrict__ src,
                                int ld_src) {
  const size_t total = size_t(n) * size_t(dim);
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const int k = int(e / size_t(dim));
    const size_t j = e % size_t(dim);
    const int32_t row = keys[k];
    if (k > 0 && keys[k - 1] == row) continue;  // inside a run: its first thread does the work
    float* dst = dtable + size_t(row) * size_t(dim) + j;
    float acc = *dst;
    for (int q = k; q < n && keys[q] == row; ++q) acc += src[size_t(order[q]) * size_t(ld_src) + j];
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
    const size_t bytes = need + need / 4;  // headroom: the batch size varies a little
    CUDA_CHECK(cudaMalloc(&s.base, bytes));
    s.bytes = bytes;
    s.device = device;
  }
  return s.base;
}

}  // namespace

void embedding_gather(const float* table, int dim, const int32_t* idx, int n, float* out, int ld_out) {
  if (n <= 0 || dim <= 0) return;
  const size_t total = size_t(n) * size_t(dim);
  gather_rows<<<blocks_for(total), kThreads, 0, stream()>>>(table, dim, idx, n, out, ld_out);
  CUDA_CHECK_LAUNCH();
}

void embedding_scatter_add(float* dtable, int dim, const int32_t* idx, int n, const float* src, int ld_src) {
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

  iota<<<blocks_for(size_t(n)), kThreads, 0, stream()>>>(order_in, n);
  CUDA_CHECK_LAUNCH();
  // LSD radix sort is stable: equal indices keep their increasing positions i.
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, idx, keys, order_in, order, n, 0, 32, stream()));
  const size_t total = size_t(n) * size_t(dim);
  add_sorted_runs<<<blocks_for(total), kThreads, 0, stream()>>>(dtable, dim, keys, order, n, src, ld_src);
  CUDA_CHECK_LAUNCH();
}

}  // namespace mlpd::cuda
