#include "comm/reduce_kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/bf16.h"
#include "core/check.h"

namespace mlpd {

WirePrecision parse_precision(const std::string& s) {
  if (s == "fp32") return WirePrecision::fp32;
  if (s == "bf16") return WirePrecision::bf16;
  if (s == "fp16") return WirePrecision::fp16;
  throw UserError("unknown communication precision '" + s + "' (expected fp32, bf16 or fp16)");
}

const char* precision_name(WirePrecision p) {
  switch (p) {
    case WirePrecision::fp32: return "fp32";
    case WirePrecision::bf16: return "bf16";
    case WirePrecision::fp16: return "fp16";
  }
  return "?";
}

namespace {

void to_fp16(const float* src, uint16_t* dst, size_t n) {
  size_t i = 0;
#ifdef __F16C__
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
#else
#error "fp16 wire precision needs F16C (build with -march=native on x86-64)"
#endif
}
void from_fp16(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = _cvtsh_ss(src[i]);
}

constexpr size_t kTile = 1024;  // floats: one tile of partial sums stays in L1

}  // namespace

void encode_wire(const float* src, void* dst, size_t n, WirePrecision p) {
  switch (p) {
    case WirePrecision::fp32: std::memcpy(dst, src, n * 4); break;
    case WirePrecision::bf16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      break;
    }
    case WirePrecision::fp16: to_fp16(src, static_cast<uint16_t*>(dst), n); break;
  }
}

void decode_wire(const void* src, float* dst, size_t n, WirePrecision p) {
  switch (p) {
    case WirePrecision::fp32: std::memcpy(dst, src, n * 4); break;
    case WirePrecision::bf16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      break;
    }
    case WirePrecision::fp16: from_fp16(static_cast<const uint16_t*>(src), dst, n); break;
  }
}

void round_to_wire(float* x, size_t n, WirePrecision p) {
  if (p == WirePrecision::fp32) return;
  uint16_t tmp[kTile];
  for (size_t off = 0; off < n; off += kTile) {
    size_t m = std::min(kTile, n - off);
    encode_wire(x + off, tmp, m, p);
    decode_wire(tmp, x + off, m, p);
  }
}

namespace {

// Loads contribution k, elements [off, off+m), as fp32 (rounded to the wire precision).
inline const float* load(const void* const* srcs, const float* const* srcs_f32, int k, size_t off, size_t m,
                         WirePrecision p, float* scratch) {
  if (srcs_f32 && srcs_f32[k]) {
    if (p == WirePrecision::fp32) return srcs_f32[k] + off;
    std::memcpy(scratch, srcs_f32[k] + off, m * 4);
    round_to_wire(scratch, m, p);
    return scratch;
  }
  if (p == WirePrecision::fp32) return static_cast<const float*>(srcs[k]) + off;
  decode_wire(static_cast<const uint16_t*>(srcs[k]) + off, scratch, m, p);
  return scratch;
}

}  // namespace

namespace {

// fp32, up to 4 contributions: out = ((start + x0) + x1) + ... (or from x0 where there is no
// start) in one pass, no partial sums through L1. The same adds in the same order as the tiled
// path below, so the same bits.
template <int P, bool kStart>
void sum_fp32_fused(const float* start, const float* const* x, size_t n, float* out, float* wire) {
  for (size_t i = 0; i < n; ++i) {
    float acc = kStart ? start[i] : x[0][i];
    for (int k = kStart ? 0 : 1; k < P; ++k) acc += x[k][i];
    out[i] = acc;
    if (wire) wire[i] = acc;
  }
}

template <bool kStart>
bool try_fused(const float* start, const void* const* srcs, const float* const* srcs_f32, int count, size_t n,
               float* out, float* wire) {
  if (count < (kStart ? 1 : 2) || count > 4) return false;
  const float* x[4];
  for (int k = 0; k < count; ++k) x[k] = srcs_f32 && srcs_f32[k] ? srcs_f32[k] : static_cast<const float*>(srcs[k]);
  switch (count) {
    case 1: sum_fp32_fused<1, kStart>(start, x, n, out, wire); return true;
    case 2: sum_fp32_fused<2, kStart>(start, x, n, out, wire); return true;
    case 3: sum_fp32_fused<3, kStart>(start, x, n, out, wire); return true;
    default: sum_fp32_fused<4, kStart>(start, x, n, out, wire); return true;
  }
}

// One tile [off, off+m) of the chain into acc (fp32, unrounded).
inline void chain_tile(const float* start, const void* const* srcs, const float* const* srcs_f32, int count,
                       size_t off, size_t m, WirePrecision p, float* acc, float* scratch) {
  int k = 0;
  if (start) {
    std::memcpy(acc, start + off, m * 4);
  } else {
    std::memcpy(acc, load(srcs, srcs_f32, 0, off, m, p, scratch), m * 4);  // from the first: -0.0 survives
    k = 1;
  }
  for (; k < count; ++k) {
    const float* x = load(srcs, srcs_f32, k, off, m, p, scratch);
    for (size_t i = 0; i < m; ++i) acc[i] += x[i];
  }
}

}  // namespace

void sum_in_order(const float* start, const void* const* srcs, const float* const* srcs_f32, int count, size_t n,
                  WirePrecision p, float* out) {
  MLPD_CHECK(count >= (start ? 0 : 1), "sum_in_order: nothing to sum");
  if (p == WirePrecision::fp32) {
    if (start ? try_fused<true>(start, srcs, srcs_f32, count, n, out, nullptr)
              : try_fused<false>(nullptr, srcs, srcs_f32, count, n, out, nullptr))
      return;
  }
  alignas(64) float acc[kTile];
  alignas(64) float scratch[kTile];
  for (size_t off = 0; off < n; off += kTile) {
    const size_t m = std::min(kTile, n - off);
    chain_tile(start, srcs, srcs_f32, count, off, m, p, acc, scratch);
    std::memcpy(out + off, acc, m * 4);
  }
}

void canonical_sum(const void* const* srcs, const float* const* srcs_f32, int count, size_t n, WirePrecision p,
                   float* out_f32, void* out_wire) {
  MLPD_CHECK(count >= 1, "canonical_sum: nothing to sum");
  auto* wire32 = static_cast<float*>(out_wire);
  if (p == WirePrecision::fp32 && try_fused<false>(nullptr, srcs, srcs_f32, count, n, out_f32, wire32)) return;
  alignas(64) float acc[kTile];
  alignas(64) float scratch[kTile];
  for (size_t off = 0; off < n; off += kTile) {
    const size_t m = std::min(kTile, n - off);
    chain_tile(nullptr, srcs, srcs_f32, count, off, m, p, acc, scratch);
    if (p == WirePrecision::fp32) {
      std::memcpy(out_f32 + off, acc, m * 4);
      if (out_wire) std::memcpy(static_cast<float*>(out_wire) + off, acc, m * 4);
    } else {
      uint16_t* w = out_wire ? static_cast<uint16_t*>(out_wire) + off : reinterpret_cast<uint16_t*>(scratch);
      encode_wire(acc, w, m, p);
      decode_wire(w, out_f32 + off, m, p);
    }
  }
}

}  // namespace mlpd
