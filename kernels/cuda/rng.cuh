// Device copies of core/rng.h's counter-based generator: the same arithmetic on 64-bit integers,
// so a value is bit-identical on the CPU and the GPU (dropout masks agree across devices).
// Keep in step with src/core/rng.h; tests/gpu/gpu_transformer_ops_test.cpp compares the masks.
#pragma once
#include <cstdint>

namespace mlpd::cuda {

__host__ __device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__host__ __device__ __forceinline__ uint64_t rng_u64(uint64_t seed, uint64_t stream, uint64_t counter) {
  return mix64(mix64(seed ^ mix64(stream)) ^ counter);
}

// Uniform in [0, 1): the top 24 bits, exactly representable, times 2^-24.
__host__ __device__ __forceinline__ float rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter) {
  return static_cast<float>(rng_u64(seed, stream, counter) >> 40) * (1.0f / 16777216.0f);
}

}  // namespace mlpd::cuda
