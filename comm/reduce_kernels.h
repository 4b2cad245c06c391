// The arithmetic of every host allreduce path: wire precision (fp32, bf16, fp16) and the one
// canonical order in which contributions are summed, so every backend, every bucketing and every
// node layout gives the same bits.
//
// Canonical order: plain rank order. The sum starts from rank 0's contribution and adds the others
// one at a time, ((x0 + x1) + x2) + x3, whatever the number of nodes: so 2 nodes x 2 ranks give
// the same parameters as 1 node x 4 ranks. A backend that works node by node continues the partial
// of the ranks before (sum_in_order with a start) instead of adding node sums, which would be
// (x0 + x1) + (x2 + x3). Partials travel in fp32. With a compressed wire precision p the result is
// round_p(canonical_sum(round_p(x_r))): every rank gets identical bits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace mlpd {

enum class WirePrecision : uint8_t { fp32, bf16, fp16 };

WirePrecision parse_precision(const std::string& s);  // throws UserError on anything else
const char* precision_name(WirePrecision p);
inline size_t wire_bytes(WirePrecision p) { return p == WirePrecision::fp32 ? 4 : 2; }

// dst (wire format) <- src; src <- round(src) is encode then decode.
void encode_wire(const float* src, void* dst, size_t n, WirePrecision p);
void decode_wire(const void* src, float* dst, size_t n, WirePrecision p);
void round_to_wire(float* x, size_t n, WirePrecision p);

// The canonical sum of `count` contributions in the order given (rank order), each given in wire
// format (srcs[k]) except where srcs_f32[k] is non-null (a rank's own fp32 data, rounded to the
// wire precision on the fly). The result is rounded to the wire precision and written to out_f32
// (may alias any source) and, if out_wire is non-null, to out_wire in wire format. n is any
// length; count >= 1.
void canonical_sum(const void* const* srcs, const float* const* srcs_f32, int count, size_t n, WirePrecision p,
                   float* out_f32, void* out_wire);

// The same chain, continued and not rounded: out = ((start + x0) + x1) + ... in fp32, or
// (x0 + x1) + ... where start is null (the first ranks). Contributions are loaded as in
// canonical_sum. out may alias start or any source. canonical_sum(x0..x3) has the bits of
// round_p(sum_in_order(sum_in_order(null, x0, x1), x2, x3)): how a chain across nodes stays exact.
void sum_in_order(const float* start, const void* const* srcs, const float* const* srcs_f32, int count, size_t n,
                  WirePrecision p, float* out);

}  // namespace mlpd
