// Counter-based random numbers: a value depends only on (seed, stream, counter), never on how
// many draws came before or on which rank draws it. That is what makes a run's augmentation and
// shuffling identical at 1 and N ranks, and a loss curve reproducible bit for bit.
#pragma once
#include <cstdint>

namespace mlpd {

inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline uint64_t rng_u64(uint64_t seed, uint64_t stream, uint64_t counter) {
  return mix64(mix64(seed ^ mix64(stream)) ^ counter);
}

// The stream of dropout masks (kernels: dropout_forward); the counter is the element's offset.
inline constexpr uint64_t kDropoutStream = 0x4452'4F50'0000'0000ull;  // "DROP"

// Uniform in [0, 1).
inline float rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter) {
  return static_cast<float>(rng_u64(seed, stream, counter) >> 40) * (1.0f / 16777216.0f);
}

// Uniform integer in [0, n).
inline uint64_t rng_below(uint64_t seed, uint64_t stream, uint64_t counter, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(rng_u64(seed, stream, counter)) * n) >> 64);
}

// A sequential generator for initialisation (same sequence for the same seed).
struct Rng {
  uint64_t seed;
  uint64_t stream;
  uint64_t counter = 0;
  uint64_t next_u64() { return rng_u64(seed, stream, counter++); }
  float uniform() { return rng_uniform(seed, stream, counter++); }
  // Standard normal via Box-Muller.
  float normal();
};

}  // namespace mlpd
