// exp and tanh in plain float arithmetic that the compiler vectorises (libm's expf/tanhf calls keep a
// loop scalar): the CPU kernels of gnmt (LSTM cell, additive attention) spend their pointwise time here.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

namespace mlpd::cpu {

// exp(x) for x in [-87, 88] (clamped there; NaN gives NaN), relative error about 1e-7, in plain
// arithmetic the compiler vectorises: 2^k e^r with k = round(x / ln2), |r| <= ln2/2 and e^r by its
// Taylor polynomial to r^7.
inline float exp_fast(float x) {
  float y = x > -87.0f ? x : -87.0f;  // NaN becomes -87 here: the int conversion below needs a number
  y = y < 88.0f ? y : 88.0f;
  const float kf = (y * 1.44269504f + 12582912.0f) - 12582912.0f;  // round to nearest (1.5 * 2^23)
  const float r = (y - kf * 0.693359375f) + kf * 2.12194440e-4f;     // y - k ln2, ln2 in two parts
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float e = p * std::bit_cast<float>((int32_t(kf) + 127) << 23);
  return x == x ? e : x;
}

// tanh(x) with an absolute error below 1e-7 over all floats (relative 5e-7 near 0): tanh|x| =
// (1 - t) / (1 + t), t = exp(-2|x|); below |x| = 0.04 the odd series x - x^3/3 + 2x^5/15, which
// avoids the cancellation in 1 - t. NaN in gives NaN out.
inline float tanh_fast(float x) {
  const float ax = std::fabs(x);
  const float t = exp_fast(-2.0f * ax);
  const float big = (1.0f - t) / (1.0f + t);
  const float x2 = ax * ax;
  const float small = ax * (1.0f + x2 * (-1.0f / 3.0f + x2 * (2.0f / 15.0f)));
  return std::copysign(ax < 0.04f ? small : big, x);
}

}  // namespace mlpd::cpu
