// The arithmetic of every host allreduce path: wire precision (fp32, bf16, fp16) and the one
// canonical order in which contributions are summed, so every backend and every bucketing gives
// the same bits.
//
// Canonical order: contributions are grouped by node (nodes in index order, ranks inside a node in
// local-rank order); each node's sum starts from its first rank and adds the others in order; the
// total starts from node 0's sum and adds the other nodes' sums in order. On one node this is plain
// rank order ((x0 + x1) + x2) + x3. With a compressed wire precision p the result is
// round_p(canonical_sum(round_p(x_r))): every rank gets identical bits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mlpd {

enum class WirePrecision : uint8_t { fp32, bf16, fp16 };

WirePrecision parse_precision(const std::string& s);  // throws UserError on anything else
const char* precision_name(WirePrecision p);
inline size_t wire_bytes(WirePrecision p) { return p == WirePrecision::fp32 ? 4 : 2; }

// dst (wire format) <- src; src <- round(src) is encode then decode.
void encode_wire(const float* src, void* dst, size_t n, WirePrecision p);
void decode_wire(const void* src, float* dst, size_t n, WirePrecision p);
void round_to_wire(float* x, size_t n, WirePrecision p);

// The canonical sum of `count` contributions, each given in wire format (srcs[k]) except where
// srcs_f32[k] is non-null (a rank's own fp32 data, rounded to the wire precision on the fly).
// `groups` holds the index of the first contribution of each node, ascending, groups[0] == 0.
// The result is rounded to the wire precision and written to out_f32 (may alias any source) and,
// if out_wire is non-null, to out_wire in wire format. n is any length.
void canonical_sum(const void* const* srcs, const float* const* srcs_f32, int count, const std::vector<int>& groups,
                   size_t n, WirePrecision p, float* out_f32, void* out_wire);

}  // namespace mlpd
