#include "nn/conv_bn.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/rng.h"

namespace mlpd::nn {

ConvBn make_conv_bn(ParamStore& s, DeviceBuffers& buf, const ConvBnSpec& spec, const std::string& name,
                    const float* x, int h, int w, int c_in, int c_out, int k, int stride, int pad, bool relu) {
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
  u.conv.x = x;
  u.conv.y = buf.floats(act);
  u.bn.x = u.conv.y;
  u.bn.y = buf.floats(act);
  u.bn.relu = relu;
  u.bn.save_mean = buf.floats(size_t(2) * c_out);
  u.bn.save_invstd = u.bn.save_mean + c_out;
  u.dconv = buf.floats(act);
  return u;
}

void forward(const OpTable& o, const ConvBn& u, ParamStore& s, Arena& a, int n, bool train) {
  forward(o, u.conv, s, a, n);
  forward(o, u.bn, s, n, train);
}

void backward(const OpTable& o, const ConvBn& u, ParamStore& s, Arena& a, int n, const float* dy, float* dx,
              bool accumulate_dx, const ReadyFn& ready) {
  backward(o, u.bn, s, a, n, dy, u.dconv);
  ready(u.bn.beta);
  ready(u.bn.gamma);
  backward(o, u.conv, s, a, n, u.dconv, dx, accumulate_dx);
  ready(u.conv.w);
}

size_t scratch_floats(const OpTable& o, const ConvBn& u, int n) {
  // BN backward takes 4*c doubles; keep a margin for the arena's alignment.
  return std::max(scratch_floats(o, u.conv, n), size_t(8) * u.c_out + 64);
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

BasicBlock make_basic_block(ParamStore& s, DeviceBuffers& buf, const ConvBnSpec& spec, const std::string& name,
                            const float* x, int h, int w, int c_in, int c_out, int stride) {
  BasicBlock blk;
  blk.in = x;
  blk.in_per_image = size_t(h) * w * c_in;
  blk.a = make_conv_bn(s, buf, spec, name + ".unit1", x, h, w, c_in, c_out, 3, stride, 1, true);
  blk.b = make_conv_bn(s, buf, spec, name + ".unit2", blk.a.bn.y, blk.a.out_h, blk.a.out_w, c_out, c_out, 3, 1, 1,
                       true);
  if (stride != 1 || c_in != c_out) {
    blk.has_proj = true;
    blk.proj = make_conv_bn(s, buf, spec, name + ".downsample", x, h, w, c_in, c_out, 1, stride, 0, false);
    MLPD_CHECK(blk.proj.out_per_image == blk.b.out_per_image, "basic block: shortcut shape mismatch in " + name);
  }
  blk.b.bn.residual = blk.has_proj ? blk.proj.bn.y : x;
  blk.out = blk.b.bn.y;
  blk.out_per_image = blk.b.out_per_image;
  blk.out_h = blk.b.out_h;
  blk.out_w = blk.b.out_w;
  blk.c_out = c_out;
  blk.dout_masked = buf.floats(blk.out_per_image * size_t(spec.max_batch));
  blk.dmid = buf.floats(blk.a.out_per_image * size_t(spec.max_batch));
  return blk;
}

void forward(const OpTable& o, const BasicBlock& blk, ParamStore& s, Arena& a, int n, bool train) {
  if (blk.has_proj) forward(o, blk.proj, s, a, n, train);  // the residual b's BN adds
  forward(o, blk.a, s, a, n, train);
  forward(o, blk.b, s, a, n, train);
}

void backward(const OpTable& o, const BasicBlock& blk, ParamStore& s, Arena& a, int n, const float* dy, float* dx,
              bool accumulate_dx, const ReadyFn& ready) {
  // The final ReLU's mask applies to both the main path and the shortcut.
  float* g = blk.dout_masked;
  o.relu_backward(blk.out, dy, g, blk.out_per_image * size_t(n));
  // Reverse registration order: shortcut, then unit2, then unit1.
  if (blk.has_proj) {
    backward(o, blk.proj, s, a, n, g, dx, accumulate_dx, ready);
  } else if (accumulate_dx) {
    o.add_forward(dx, g, dx, blk.in_per_image * size_t(n));
  } else {
    copy_within(o.device, dx, g, sizeof(float) * blk.in_per_image * size_t(n));
  }
  backward(o, blk.b, s, a, n, g, blk.dmid, false, ready);
  backward(o, blk.a, s, a, n, blk.dmid, dx, true, ready);
}

size_t scratch_floats(const OpTable& o, const BasicBlock& blk, int n) {
  size_t f = std::max(scratch_floats(o, blk.a, n), scratch_floats(o, blk.b, n));
  if (blk.has_proj) f = std::max(f, scratch_floats(o, blk.proj, n));
  return f;
}

void init_basic_block(const BasicBlock& blk, ParamStore& s, uint64_t seed, bool zero_init_residual) {
  init_conv_bn(blk.a, s, seed);
  init_conv_bn(blk.b, s, seed, zero_init_residual);
  if (blk.has_proj) init_conv_bn(blk.proj, s, seed);
}

double flops_per_image(const BasicBlock& blk) {
  double f = conv_flops_per_image(blk.a.conv) + conv_flops_per_image(blk.b.conv);
  if (blk.has_proj) f += conv_flops_per_image(blk.proj.conv);
  return f;
}

}  // namespace mlpd::nn
