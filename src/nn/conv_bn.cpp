#include "nn/conv_bn.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "core/rng.h"
#include "nn/bf16_storage.h"

namespace mlpd::nn {

namespace {

size_t in_per_image(const ConvBn& u) { return size_t(u.conv.dims.h) * u.conv.dims.w * u.conv.dims.c_in; }

// A unit reading x (fp32) or x16 (another unit's bf16 output); output_bf16: only convolutions will
// read its output, so it too may be kept as bf16 (bf16 storage only).
ConvBn make_unit(ParamStore& s, DeviceBuffers& buf, const ConvBnSpec& spec, const std::string& name, const float* x,
                 const uint16_t* x16, int h, int w, int c_in, int c_out, int k, int stride, int pad, bool relu,
                 bool output_bf16) {
  ConvBn u;
  u.conv = make_conv2d(s, name + ".conv", h, w, c_in, c_out, k, stride, pad, spec.max_batch);
  u.out_h = u.conv.dims.out_h();
  u.out_w = u.conv.dims.out_w();
  MLPD_CHECK(u.out_h > 0 && u.out_w > 0, "conv_bn: input " + std::to_string(h) + "x" + std::to_string(w) +
                                             " too small at " + name);
  u.c_out = c_out;
  u.out_per_image = size_t(u.out_h) * u.out_w * c_out;
  u.bn = make_batchnorm(s, name + ".bn", c_out, int64_t(u.out_h) * u.out_w, spec.bn_momentum, spec.bn_eps);
  const size_t act = u.out_per_image * size_t(spec.max_batch);
  MLPD_CHECK(u.out_per_image <= size_t(std::numeric_limits<int>::max()), "conv_bn: output too large at " + name);
  MLPD_CHECK(in_per_image(u) <= size_t(std::numeric_limits<int>::max()), "conv_bn: input too large at " + name);
  const bool bf16 = spec.precision == Precision::bf16;
  MLPD_CHECK(bf16 || (!x16 && !output_bf16), "conv_bn: bf16 storage in an fp32 unit at " + name);
  u.conv.x = x;
  u.x16 = x16;
  if (bf16) {
    u.conv_y16 = buf.halves(act);
  } else {
    u.conv.y = buf.floats(act);
    u.bn.x = u.conv.y;
  }
  if (output_bf16) {
    u.y16 = buf.halves(act);
  } else {
    u.bn.y = buf.floats(act);
  }
  u.bn.relu = relu;
  u.bn.save_mean = buf.floats(size_t(2) * c_out);
  u.bn.save_invstd = u.bn.save_mean + c_out;
  return u;
}

}  // namespace

ConvBn make_conv_bn(ParamStore& s, DeviceBuffers& buf, const ConvBnSpec& spec, const std::string& name,
                    const float* x, int h, int w, int c_in, int c_out, int k, int stride, int pad, bool relu) {
  return make_unit(s, buf, spec, name, x, nullptr, h, w, c_in, c_out, k, stride, pad, relu, false);
}

void forward(const OpTable& o, const ConvBn& u, ParamStore& s, Arena& a, int n, bool train) {
  if (!u.conv_y16) {
    forward(o, u.conv, s, a, n);
    forward(o, u.bn, s, n, train);
    return;
  }
  // The bf16 table rounds the conv's output, so packing it loses nothing; an fp32 table would not.
  MLPD_CHECK(o.precision == Precision::bf16, "conv_bn: a unit built for bf16 storage run with an fp32 op table");
  ArenaScope scope(a);
  Conv2d conv = u.conv;
  conv.y = arena_floats(a, size_t(n) * u.out_per_image);
  if (u.x16)
    forward_image_bf16(o, conv, u.x16, s, a, n);  // any widened copy is gone before the BN's operands come
  else
    forward(o, conv, s, a, n);
  pack_items(o, conv.y, n, u.out_per_image, u.conv_y16);
  BatchNorm bn = u.bn;
  bn.x = conv.y;
  if (u.residual16) bn.residual = bf16_widened_rows(o, a, u.residual16, n, u.out_per_image);
  if (u.y16) bn.y = arena_floats(a, size_t(n) * u.out_per_image);
  forward(o, bn, s, n, train);
  if (u.y16) pack_items(o, bn.y, n, u.out_per_image, u.y16);
}

void backward(const OpTable& o, const ConvBn& u, ParamStore& s, Arena& a, int n, const float* dy, float* dx,
              bool accumulate_dx, const ReadyFn& ready) {
  ArenaScope scope(a);
  float* dconv = arena_floats(a, size_t(n) * u.out_per_image);
  {
    ArenaScope bn_scope(a);
    BatchNorm bn = u.bn;
    if (u.conv_y16) bn.x = bf16_widened_rows(o, a, u.conv_y16, n, u.out_per_image);
    const float* g = dy;
    if (u.y16) {
      // The ReLU's mask, y > 0, is the same on the rounded y: rounding keeps a sign, and only a
      // magnitude of at most 2^-134 (a subnormal; the ranks flush those to zero) rounds to zero.
      // Applied off the kept bits, ahead of a BN backward without its own.
      o.relu_backward_bf16(u.y16, dy, dconv, size_t(n) * u.out_per_image);
      bn.relu = false;
      g = dconv;
    }
    backward(o, bn, s, a, n, g, dconv);
  }
  ready(u.bn.beta);
  ready(u.bn.gamma);
  if (u.x16)
    backward_image_bf16(o, u.conv, u.x16, s, a, n, dconv, dx, accumulate_dx);
  else
    backward(o, u.conv, s, a, n, dconv, dx, accumulate_dx);
  ready(u.conv.w);
}

namespace {

// A unit's Arena floats in its forward and in its backward (a block's own buffers come on top of
// the second only).
struct UnitScratch {
  size_t forward = 0, backward = 0;
};

UnitScratch unit_scratch(const OpTable& o, const ConvBn& u, int n) {
  const size_t act = arena_span(size_t(n) * u.out_per_image);
  // bf16 storage: fp32 copies of what is kept as bf16 (the conv reads a kept input itself).
  const size_t conv_output = u.conv_y16 ? act : 0;
  const size_t output = u.y16 ? act : 0;
  const size_t residual = u.residual16 ? act : 0;
  const size_t conv = u.x16 ? scratch_floats_image_bf16(o, u.conv, n) : scratch_floats(o, u.conv, n);
  const size_t bn_backward = size_t(8) * u.c_out + 64;  // 4*c doubles, and a margin for the alignment
  // Forward: the conv's output, under the conv's scratch (with any widened input), then the BN's.
  const size_t fwd = conv_output + std::max(conv, residual + output);
  // Backward: the gradient at the conv's output (act) under the BN's and then the conv's scratch.
  const size_t bwd = act + std::max(conv_output + bn_backward, conv);
  return {fwd, bwd};
}

}  // namespace

size_t scratch_floats(const OpTable& o, const ConvBn& u, int n) {
  const UnitScratch need = unit_scratch(o, u, n);
  return std::max(need.forward, need.backward);
}

void init_conv_bn(const ConvBn& u, ParamStore& s, uint64_t seed, bool zero_gamma) {
  MLPD_CHECK(s.finalized, "init_conv_bn before finalize_params");
  Rng r{seed, u.conv.w};
  const double fan_out = double(u.conv.dims.k) * u.conv.dims.k * u.conv.dims.c_out;
  const float std = float(std::sqrt(2.0 / fan_out));
  float* w = param_ptr(s, u.conv.w);
  for (size_t i = 0; i < s.views[u.conv.w].count; ++i) w[i] = std * r.normal();
  std::fill_n(param_ptr(s, u.bn.gamma), u.c_out, zero_gamma ? 0.0f : 1.0f);
  std::fill_n(param_ptr(s, u.bn.beta), u.c_out, 0.0f);
  std::fill_n(state_ptr(s, u.bn.run_mean), u.c_out, 0.0f);
  std::fill_n(state_ptr(s, u.bn.run_var), u.c_out, 1.0f);
}

double conv_flops_per_image(const Conv2d& c) {
  const ConvDims& d = c.dims;
  return 2.0 * double(d.out_h()) * d.out_w() * d.k * d.k * d.c_in * d.c_out;
}

ResidualBlock make_residual_block(ParamStore& s, DeviceBuffers& buf, const ConvBnSpec& spec, const std::string& name,
                                  const BlockIo& io, int h, int w, int c_in, const std::vector<UnitShape>& units) {
  MLPD_CHECK(!units.empty(), "residual block without units: " + name);
  MLPD_CHECK((io.x == nullptr) != (io.x16 == nullptr), "residual block: one input, fp32 or bf16, at " + name);
  ResidualBlock blk;
  blk.in = io.x;
  blk.in16 = io.x16;
  blk.in_per_image = size_t(h) * w * c_in;
  const float* cur = io.x;
  const uint16_t* cur16 = io.x16;
  int ch = h, cw = w, cc = c_in, stride = 1;
  for (size_t i = 0; i < units.size(); ++i) {
    const UnitShape& u = units[i];
    // bf16 storage: the next unit's convolution alone reads a unit's output, but not the last's
    // unless the block's output is kept as bf16.
    const bool last = i + 1 == units.size();
    const bool output_bf16 = spec.precision == Precision::bf16 && (!last || io.output_bf16);
    blk.main.push_back(make_unit(s, buf, spec, name + ".unit" + std::to_string(i + 1), cur, cur16, ch, cw, cc, u.c_out,
                                 u.k, u.stride, u.pad, true, output_bf16));
    const ConvBn& made = blk.main.back();
    cur = made.bn.y;
    cur16 = made.y16;
    ch = made.out_h, cw = made.out_w, cc = u.c_out;
    stride *= u.stride;
  }
  if (stride != 1 || cc != c_in) {
    blk.has_proj = true;
    blk.proj = make_unit(s, buf, spec, name + ".downsample", io.x, io.x16, h, w, c_in, cc, 1, stride, 0, false, false);
    MLPD_CHECK(blk.proj.out_per_image == blk.main.back().out_per_image, "residual block: shortcut shape mismatch in " + name);
  }
  ConvBn& last = blk.main.back();
  last.bn.residual = blk.has_proj ? blk.proj.bn.y : io.x;
  if (!blk.has_proj) last.residual16 = io.x16;
  blk.out = last.bn.y;
  blk.out16 = last.y16;
  blk.out_per_image = last.out_per_image;
  blk.out_h = ch;
  blk.out_w = cw;
  blk.c_out = cc;
  return blk;
}

ResidualBlock make_basic_block(ParamStore& s, DeviceBuffers& buf, const ConvBnSpec& spec, const std::string& name,
                               const BlockIo& io, int h, int w, int c_in, int c_out, int stride) {
  return make_residual_block(s, buf, spec, name, io, h, w, c_in, {{c_out, 3, stride, 1}, {c_out, 3, 1, 1}});
}

ResidualBlock make_bottleneck_block(ParamStore& s, DeviceBuffers& buf, const ConvBnSpec& spec,
                                    const std::string& name, const BlockIo& io, int h, int w, int c_in, int width,
                                    int stride) {
  return make_residual_block(s, buf, spec, name, io, h, w, c_in,
                             {{width, 1, 1, 0}, {width, 3, stride, 1}, {4 * width, 1, 1, 0}});
}

void forward(const OpTable& o, const ResidualBlock& blk, ParamStore& s, Arena& a, int n, bool train) {
  if (blk.has_proj) forward(o, blk.proj, s, a, n, train);  // the residual the last unit's BN adds
  for (const ConvBn& u : blk.main) forward(o, u, s, a, n, train);
}

void backward(const OpTable& o, const ResidualBlock& blk, ParamStore& s, Arena& a, int n, const float* dy, float* dx,
              bool accumulate_dx, const ReadyFn& ready) {
  // The gradients inside the block are scratch: g, then the one at each unit's output.
  ArenaScope scope(a);
  // The final ReLU's mask applies to both the main path and the shortcut.
  float* g = arena_floats(a, blk.out_per_image * size_t(n));
  if (blk.out16)
    o.relu_backward_bf16(blk.out16, dy, g, blk.out_per_image * size_t(n));
  else
    o.relu_backward(blk.out, dy, g, blk.out_per_image * size_t(n));
  if (blk.has_proj) {
    backward(o, blk.proj, s, a, n, g, dx, accumulate_dx, ready);
  } else if (accumulate_dx) {
    o.add_forward(dx, g, dx, blk.in_per_image * size_t(n));
  } else {
    copy_within(o.device, dx, g, sizeof(float) * blk.in_per_image * size_t(n));
  }
  const float* d = g;
  for (size_t i = blk.main.size(); i-- > 0;) {
    if (i == 0) {
      backward(o, blk.main[0], s, a, n, d, dx, true, ready);
    } else {
      float* dunit = arena_floats(a, blk.main[i - 1].out_per_image * size_t(n));
      backward(o, blk.main[i], s, a, n, d, dunit, false, ready);
      d = dunit;
    }
  }
}

size_t scratch_floats(const OpTable& o, const ResidualBlock& blk, int n) {
  UnitScratch units = blk.has_proj ? unit_scratch(o, blk.proj, n) : UnitScratch{};
  for (const ConvBn& u : blk.main) {
    const UnitScratch need = unit_scratch(o, u, n);
    units.forward = std::max(units.forward, need.forward);
    units.backward = std::max(units.backward, need.backward);
  }
  size_t gradients = arena_span(blk.out_per_image * size_t(n));
  for (size_t i = 0; i + 1 < blk.main.size(); ++i) gradients += arena_span(blk.main[i].out_per_image * size_t(n));
  return std::max(units.forward, gradients + units.backward);
}

void init_residual_block(const ResidualBlock& blk, ParamStore& s, uint64_t seed, bool zero_init_residual) {
  for (size_t i = 0; i < blk.main.size(); ++i)
    init_conv_bn(blk.main[i], s, seed, zero_init_residual && i + 1 == blk.main.size());
  if (blk.has_proj) init_conv_bn(blk.proj, s, seed);
}

double flops_per_image(const ResidualBlock& blk) {
  double f = blk.has_proj ? conv_flops_per_image(blk.proj.conv) : 0.0;
  for (const ConvBn& u : blk.main) f += conv_flops_per_image(u.conv);
  return f;
}

}  // namespace mlpd::nn

namespace mlpd::nn {

Backbone make_backbone(ParamStore& s, DeviceBuffers& buf, const ConvBnSpec& spec, const float* input, int h, int w,
                       int c, int stem_channels, int stem_kernel, int stem_stride, bool maxpool) {
  Backbone b;
  b.stem = make_conv_bn(s, buf, spec, "stem", input, h, w, c, stem_channels, stem_kernel, stem_stride, stem_kernel / 2,
                        true);
  b.flops = conv_flops_per_image(b.stem.conv);
  b.out = b.stem.bn.y;
  b.out_h = b.stem.out_h, b.out_w = b.stem.out_w, b.out_c = stem_channels;
  if (maxpool) {
    const size_t mb = size_t(spec.max_batch);
    b.has_maxpool = true;
    b.pool.dims = PoolDims{spec.max_batch, b.out_h, b.out_w, b.out_c, 3, 2, 1};
    b.pool.x = b.out;
    b.out_h = b.pool.dims.out_h();
    b.out_w = b.pool.dims.out_w();
    MLPD_CHECK(b.out_h > 0 && b.out_w > 0, "backbone: input too small for the stem");
    b.pool.y = buf.floats(size_t(b.out_h) * b.out_w * b.out_c * mb);
    b.dpool_in = buf.floats(b.stem.out_per_image * mb);
    b.out = b.pool.y;
  }
  return b;
}

namespace {

void append_block(Backbone& b, DeviceBuffers& buf, const ConvBnSpec& spec, ResidualBlock blk) {
  // Block i's input gradient is read only by block i - 1's backward, so two buffers take turns.
  const size_t floats = blk.in_per_image * size_t(spec.max_batch);
  if (floats > b.dblock_in_floats) {  // a larger input than any before: a new pair (the old one idles)
    b.dblock_in_floats = floats;
    b.dblock_in[0] = buf.floats(floats);
    b.dblock_in[1] = buf.floats(floats);
  }
  b.flops += flops_per_image(blk);
  b.out = blk.out;
  b.out16 = blk.out16;
  b.out_h = blk.out_h, b.out_w = blk.out_w, b.out_c = blk.c_out;
  b.blocks.push_back(std::move(blk));
}

BlockIo next_block_io(const Backbone& b, const ConvBnSpec& spec, BlockOutput out) {
  return {b.out, b.out16, spec.precision == Precision::bf16 && out == BlockOutput::next_block_only};
}

}  // namespace

void add_basic_block(Backbone& b, ParamStore& s, DeviceBuffers& buf, const ConvBnSpec& spec, const std::string& name,
                     int c_out, int stride, BlockOutput out) {
  append_block(b, buf, spec,
               make_basic_block(s, buf, spec, name, next_block_io(b, spec, out), b.out_h, b.out_w, b.out_c, c_out, stride));
}

void add_bottleneck_block(Backbone& b, ParamStore& s, DeviceBuffers& buf, const ConvBnSpec& spec,
                          const std::string& name, int width, int stride, BlockOutput out) {
  append_block(b, buf, spec,
               make_bottleneck_block(s, buf, spec, name, next_block_io(b, spec, out), b.out_h, b.out_w, b.out_c, width,
                                     stride));
}

void forward(const OpTable& o, const Backbone& b, ParamStore& s, Arena& a, int n, bool train) {
  forward(o, b.stem, s, a, n, train);
  if (b.has_maxpool) forward(o, b.pool, n);
  for (const ResidualBlock& blk : b.blocks) forward(o, blk, s, a, n, train);
}

void backward(const OpTable& o, const Backbone& b, ParamStore& s, Arena& a, int n, const float* dy, const ReadyFn& ready) {
  backward(o, b, s, a, n, dy, ready, {});
}

void backward(const OpTable& o, const Backbone& b, ParamStore& s, Arena& a, int n, const float* dy, const ReadyFn& ready,
              const std::vector<const float*>& block_dy) {
  for (size_t i = b.blocks.size(); i-- > 0;) {
    float* dx = b.dblock_in[i % 2];  // not block i's dy, which is the other one (or the caller's)
    backward(o, b.blocks[i], s, a, n, dy, dx, false, ready);
    dy = dx;
    // dx is the gradient at block i - 1's output.
    if (i > 0 && i - 1 < block_dy.size() && block_dy[i - 1])
      o.add_forward(dx, block_dy[i - 1], dx, size_t(n) * b.blocks[i - 1].out_per_image);
  }
  if (b.has_maxpool) {
    backward(o, b.pool, n, dy, b.dpool_in);
    dy = b.dpool_in;
  }
  backward(o, b.stem, s, a, n, dy, nullptr, false, ready);
}

size_t scratch_floats(const OpTable& o, const Backbone& b, int n) {
  size_t f = scratch_floats(o, b.stem, n);
  for (const ResidualBlock& blk : b.blocks) f = std::max(f, scratch_floats(o, blk, n));
  return f;
}

void init_backbone(const Backbone& b, ParamStore& s, uint64_t seed, bool zero_init_residual) {
  init_conv_bn(b.stem, s, seed);
  for (const ResidualBlock& blk : b.blocks) init_residual_block(blk, s, seed, zero_init_residual);
}

}  // namespace mlpd::nn
