// bfloat16: the top 16 bits of an fp32 (8 exponent bits, 7 mantissa bits). One rounding, used by
// the bf16 compute precision (kernels, both devices) and by the bf16 gradient wire format (comm),
// so a value rounded in either place has the same bits.
#pragma once
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define MLPD_HOST_DEVICE __host__ __device__
#else
#define MLPD_HOST_DEVICE
#endif

namespace mlpd {

// memcpy, which nvcc also compiles for the device: the one well-defined way to read the bits.
MLPD_HOST_DEVICE inline uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
MLPD_HOST_DEVICE inline float f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// Round to nearest, ties to even; a NaN stays a (quiet) NaN, and what rounds past the largest
// bf16 becomes infinity.
MLPD_HOST_DEVICE inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

MLPD_HOST_DEVICE inline float bf16_to_f32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

// The nearest bf16 value, as an fp32.
MLPD_HOST_DEVICE inline float round_to_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

}  // namespace mlpd
