// Helpers of the bf16 tests: rounding a whole vector, and whether a value is a bf16 value.
#pragma once
#include <vector>

#include "core/bf16.h"

namespace mlpd::test {

inline std::vector<float> rounded(std::vector<float> v) {
  for (float& x : v) x = round_to_bf16(x);
  return v;
}

inline bool is_bf16(float x) { return (f32_bits(x) & 0xffffu) == 0; }

inline size_t count_not_bf16(const std::vector<float>& v) {
  size_t n = 0;
  for (float x : v) n += is_bf16(x) ? 0 : 1;
  return n;
}

}  // namespace mlpd::test
