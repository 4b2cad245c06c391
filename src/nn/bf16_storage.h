// Activations kept as bf16 between ops (--precision bf16), where that loses no bit: a value the
// bf16 op table has already rounded (a GEMM's or convolution's output), or one that only GEMMs and
// convolutions read (they round what they read) and, for a ReLU output, its own mask (the same on
// the rounded value: rounding keeps a sign, and only a magnitude of at most 2^-134, a subnormal the
// ranks flush to zero, rounds to zero). A GEMM or a bf16 convolution reads such a value as its bits
// (below); the fp32 ops read it widened into Arena scratch.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/arena.h"
#include "core/param_store.h"
#include "kernels/device.h"
#include "kernels/op_table.h"
#include "nn/layers.h"

namespace mlpd::nn {

// n items of per_item values, fp32 -> bf16 (rows of per_item values; per_item fits an int).
void pack_items(const OpTable& o, const float* x, int n, size_t per_item, uint16_t* x16);
// What arena_floats(count) may take of an arena, with an alignment step to spare.
inline size_t arena_span(size_t count) { return arena_floats_span(count) + 16; }

// A saved activation [max_items, per_item]: an fp32 buffer, or under bf16 storage a bf16 one.
struct SavedActivation {
  float* f32 = nullptr;
  uint16_t* b16 = nullptr;
  size_t per_item = 0;
};
SavedActivation make_saved_activation(DeviceBuffers& buf, size_t per_item, int max_items, bool bf16);
// Where a forward writes it: its own fp32 buffer, or Arena scratch that keep() then packs.
float* write_target(const SavedActivation& v, Arena& a, int items);
void keep(const OpTable& o, const SavedActivation& v, const float* y, int items);
// What a reader gets: the fp32 buffer, or the bf16 copy widened into Arena scratch.
const float* read_saved(const OpTable& o, const SavedActivation& v, Arena& a, int items);
// dy = dy * (y > 0) for a ReLU output y kept in v (under bf16 storage off its bits, unwidened).
void relu_backward_saved(const OpTable& o, const SavedActivation& v, int items, float* dy);
// Arena floats that write_target or read_saved take (0 for fp32 storage).
size_t scratch_floats(const SavedActivation& v, int items);

// A Linear's backward (l.x ignored) whose input is kept in x, items of x.per_item values read as
// rows of l.in. Under bf16 storage the GEMMs read x's bf16 bits as they are, with no fp32 copy
// (linear_backward_bf16_input): the bf16 table's linear_backward on the widened copy gives the
// same bits, since it packs its operands to those bits (tests/nn/maskrcnn_model_test.cpp compares).
void linear_backward_saved(const OpTable& o, const Linear& l, const SavedActivation& x, ParamStore& s, int items,
                           const float* dy, float* dx /*nullable*/);

// A convolution whose image is kept as bf16 bits (x16; l.x ignored), read as they are where the
// CPU's bf16 kernel runs the pass (kernels/op_table.h: conv2d_*_bf16_input): forward, backward
// (dx nullable, as nn::backward), and the Arena floats of either.
void forward_image_bf16(const OpTable& o, const Conv2d& l, const uint16_t* x16, ParamStore& s, Arena& a, int n);
void backward_image_bf16(const OpTable& o, const Conv2d& l, const uint16_t* x16, ParamStore& s, Arena& a, int n,
                         const float* dy, float* dx, bool accumulate_dx);
size_t scratch_floats_image_bf16(const OpTable& o, const Conv2d& l, int n);

}  // namespace mlpd::nn
