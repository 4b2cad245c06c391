#include "workloads/resnet/resnet_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <array>
#include <deque>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "kernels/device.h"
#include "nn/layers.h"

namespace mlpd {

namespace {

struct ConvBn {
  nn::Conv2d conv;
  nn::BatchNorm bn;
  size_t out_per_image = 0;  // floats of conv (= bn) output per image
};

struct Block {
  std::vector<ConvBn> main;  // the last unit's BN fuses the residual add and the final ReLU
  bool has_proj = false;
  ConvBn proj;               // 1x1 conv + BN shortcut when the shape changes
  const float* in = nullptr;
  float* out = nullptr;
  size_t in_per_image = 0, out_per_image = 0;
};

}  // namespace

struct ResNet {
  ResNetSpec spec;
  ConvBn stem;
  bool has_maxpool = false;
  nn::MaxPool pool;
  size_t pool_out_per_image = 0;
  std::vector<Block> blocks;
  nn::GlobalAvgPool gap;
  nn::Linear fc;
  const OpTable* ops = nullptr;            // the spec's device
  DeviceBuffers buffers;                   // activations, on the spec's device
  float* input = nullptr;
  size_t input_per_image = 0;
  float* grad_buf[4] = {};
  float* dfeat = nullptr;
  size_t max_act_per_image = 0;
  double flops = 0;
  size_t n_params = 0;
  std::vector<size_t> conv_views, bn_gamma_views, bn_beta_views, zero_gamma_views;
  std::vector<size_t> state_mean_views, state_var_views;
  int last_n = 0;

  float* floats(size_t n) { return buffers.floats(n); }
  float* alloc(size_t per_image) {
    max_act_per_image = std::max(max_act_per_image, per_image);
    return floats(per_image * size_t(spec.max_batch));
  }
};

namespace {

// Adds a conv + BN unit reading `x` [h, w, c_in] per image; returns output dims via oh/ow.
ConvBn add_conv_bn(ResNet& net, ParamStore& s, const std::string& name, const float* x, int h,
                   int w, int c_in, int c_out, int k, int stride, int pad, bool relu) {
  ConvBn u;
  u.conv = nn::make_conv2d(s, name + ".conv", h, w, c_in, c_out, k, stride, pad, net.spec.max_batch);
  const int oh = u.conv.dims.out_h(), ow = u.conv.dims.out_w();
  MLPD_CHECK(oh > 0 && ow > 0, "resnet: input too small at " + name);
  u.out_per_image = size_t(oh) * ow * c_out;
  u.bn = nn::make_batchnorm(s, name + ".bn", c_out, int64_t(oh) * ow, net.spec.bn_momentum,
                            net.spec.bn_epsilon);
  u.conv.x = x;
  u.conv.y = net.alloc(u.out_per_image);
  u.bn.x = u.conv.y;
  u.bn.y = net.alloc(u.out_per_image);
  u.bn.relu = relu;
  u.bn.save_mean = net.floats(size_t(2) * c_out);
  u.bn.save_invstd = u.bn.save_mean + c_out;
  net.flops += 2.0 * double(oh) * ow * k * k * c_in * c_out;
  net.conv_views.push_back(u.conv.w);
  net.bn_gamma_views.push_back(u.bn.gamma);
  net.bn_beta_views.push_back(u.bn.beta);
  net.state_mean_views.push_back(u.bn.run_mean);
  net.state_var_views.push_back(u.bn.run_var);
  return u;
}

int out_dim(int h, int k, int s, int p) { return (h + 2 * p - k) / s + 1; }

// A block's main path as a list of (c_out, k, stride, pad); shortcut projects if shape changes.
Block add_block(ResNet& net, ParamStore& s, const std::string& name, const float* in, int h, int w,
                int c_in, const std::vector<std::array<int, 4>>& units, int& oh, int& ow, int& oc) {
  Block b;
  b.in = in;
  b.in_per_image = size_t(h) * w * c_in;
  const float* x = in;
  int ch = h, cw = w, cc = c_in, stride = 1;
  for (size_t i = 0; i < units.size(); ++i) {
    const auto& u = units[i];
    const bool last = i + 1 == units.size();
    b.main.push_back(add_conv_bn(net, s, name + ".unit" + std::to_string(i + 1), x, ch, cw, cc, u[0],
                                 u[1], u[2], u[3], true));
    x = b.main.back().bn.y;
    stride *= u[2];
    ch = out_dim(ch, u[1], u[2], u[3]);
    cw = out_dim(cw, u[1], u[2], u[3]);
    cc = u[0];
    if (last && net.spec.zero_init_residual_gamma) net.zero_gamma_views.push_back(b.main.back().bn.gamma);
  }
  if (stride != 1 || cc != c_in) {
    b.has_proj = true;
    b.proj = add_conv_bn(net, s, name + ".downsample", in, h, w, c_in, cc, 1, stride, 0, false);
    MLPD_CHECK(b.proj.out_per_image == size_t(ch) * cw * cc, "resnet: shortcut shape mismatch in " + name);
  }
  ConvBn& last = b.main.back();
  last.bn.residual = b.has_proj ? b.proj.bn.y : in;
  b.out = last.bn.y;
  b.out_per_image = last.out_per_image;
  oh = ch;
  ow = cw;
  oc = cc;
  return b;
}

}  // namespace

std::unique_ptr<ResNet> build_resnet(const ResNetSpec& spec, ParamStore& s) {
  MLPD_CHECK(spec.variant == "resnet20" || spec.variant == "resnet50",
             "resnet: unknown variant '" + spec.variant + "' (resnet20 or resnet50)");
  MLPD_CHECK(spec.max_batch > 0 && spec.in_h > 0 && spec.in_w > 0 && spec.in_c > 0 &&
                 spec.num_classes > 0 && spec.blocks_per_stage > 0,
             "resnet: bad spec");
  auto net = std::make_unique<ResNet>();
  net->spec = spec;
  net->ops = &ops_for(spec.device);
  net->buffers.device = spec.device;
  const size_t first_param = s.views.size();
  net->input_per_image = size_t(spec.in_h) * spec.in_w * spec.in_c;
  net->input = net->alloc(net->input_per_image);
  int h = spec.in_h, w = spec.in_w, c = spec.in_c;
  const float* x = nullptr;
  if (spec.variant == "resnet20") {
    net->stem = add_conv_bn(*net, s, "stem", net->input, h, w, c, 16, 3, 1, 1, true);
    x = net->stem.bn.y;
    c = 16;
    const int widths[3] = {16, 32, 64};
    for (int st = 0; st < 3; ++st)
      for (int b = 0; b < spec.blocks_per_stage; ++b) {
        const int stride = (st > 0 && b == 0) ? 2 : 1;
        const int wd = widths[st];
        int oh, ow, oc;
        net->blocks.push_back(add_block(*net, s, "layer" + std::to_string(st + 1) + "." + std::to_string(b), x,
                                        h, w, c, {{wd, 3, stride, 1}, {wd, 3, 1, 1}}, oh, ow, oc));
        x = net->blocks.back().out;
        h = oh, w = ow, c = oc;
      }
  } else {
    net->stem = add_conv_bn(*net, s, "stem", net->input, h, w, c, 64, 7, 2, 3, true);
    h = out_dim(h, 7, 2, 3);
    w = out_dim(w, 7, 2, 3);
    c = 64;
    net->has_maxpool = true;
    net->pool.dims = PoolDims{spec.max_batch, h, w, c, 3, 2, 1};
    h = net->pool.dims.out_h();
    w = net->pool.dims.out_w();
    MLPD_CHECK(h > 0 && w > 0, "resnet: input too small for the stem");
    net->pool_out_per_image = size_t(h) * w * c;
    net->pool.x = net->stem.bn.y;
    net->pool.y = net->alloc(net->pool_out_per_image);
    x = net->pool.y;
    const int counts[4] = {3, 4, 6, 3};
    const int widths[4] = {64, 128, 256, 512};
    for (int st = 0; st < 4; ++st)
      for (int b = 0; b < counts[st]; ++b) {
        const int stride = (st > 0 && b == 0) ? 2 : 1;
        const int wd = widths[st];
        int oh, ow, oc;
        net->blocks.push_back(add_block(*net, s, "layer" + std::to_string(st + 1) + "." + std::to_string(b), x,
                                        h, w, c, {{wd, 1, 1, 0}, {wd, 3, stride, 1}, {4 * wd, 1, 1, 0}}, oh, ow, oc));
        x = net->blocks.back().out;
        h = oh, w = ow, c = oc;
      }
  }
  net->gap.hw = h * w;
  net->gap.c = c;
  net->gap.x = x;
  net->gap.y = net->floats(size_t(spec.max_batch) * c);
  net->fc = nn::make_linear(s, "fc", c, spec.num_classes);
  net->fc.x = net->gap.y;
  net->fc.y = net->floats(size_t(spec.max_batch) * spec.num_classes);
  net->flops += 2.0 * double(c) * spec.num_classes;
  net->dfeat = net->floats(size_t(spec.max_batch) * c);
  for (int i = 0; i < 4; ++i) net->grad_buf[i] = net->floats(net->max_act_per_image * size_t(spec.max_batch));
  for (size_t v = first_param; v < s.views.size(); ++v) net->n_params += s.views[v].count;
  return net;
}

void init_resnet(ResNet& net, ParamStore& s, uint64_t seed) {
  MLPD_CHECK(s.finalized, "init_resnet before finalize_params");
  MLPD_CHECK(!on_device(s), "init_resnet writes the host buffers: call it before place_store_on");
  auto fill_normal = [&](size_t view, float std) {
    Rng r{seed, view};
    float* p = param_ptr(s, view);
    for (size_t i = 0; i < s.views[view].count; ++i) p[i] = std * r.normal();
  };
  auto fill_uniform = [&](size_t view, float bound) {
    Rng r{seed, view};
    float* p = param_ptr(s, view);
    for (size_t i = 0; i < s.views[view].count; ++i) p[i] = bound * (2.0f * r.uniform() - 1.0f);
  };
  auto fill_const = [&](size_t view, float v) {
    std::fill(param_ptr(s, view), param_ptr(s, view) + s.views[view].count, v);
  };
  auto conv_init = [&](const nn::Conv2d& cv) {
    const double fan_out = double(cv.dims.k) * cv.dims.k * cv.dims.c_out;
    fill_normal(cv.w, float(std::sqrt(2.0 / fan_out)));
  };
  auto unit_init = [&](const ConvBn& u) {
    conv_init(u.conv);
    fill_const(u.bn.gamma, 1.0f);
    fill_const(u.bn.beta, 0.0f);
    std::fill(state_ptr(s, u.bn.run_mean), state_ptr(s, u.bn.run_mean) + u.bn.c, 0.0f);
    std::fill(state_ptr(s, u.bn.run_var), state_ptr(s, u.bn.run_var) + u.bn.c, 1.0f);
  };
  unit_init(net.stem);
  for (const Block& b : net.blocks) {
    for (const ConvBn& u : b.main) unit_init(u);
    if (b.has_proj) unit_init(b.proj);
  }
  for (size_t v : net.zero_gamma_views) fill_const(v, 0.0f);
  const float bound = 1.0f / std::sqrt(float(net.fc.in));
  fill_uniform(net.fc.w, bound);
  fill_uniform(net.fc.b, bound);
}

size_t resnet_arena_bytes(const ResNet& net, int batch) {
  size_t floats = 0;
  auto unit = [&](const ConvBn& u) {
    floats = std::max(floats, nn::scratch_floats(*net.ops, u.conv, batch));
    floats = std::max(floats, size_t(6) * u.bn.c + 64);  // BN backward: 2 double + 3 float vectors
  };
  unit(net.stem);
  for (const Block& b : net.blocks) {
    for (const ConvBn& u : b.main) unit(u);
    if (b.has_proj) unit(b.proj);
  }
  return floats * sizeof(float) + 4096;
}

namespace {

void unit_forward(const OpTable& o, const ConvBn& u, ParamStore& s, Arena& a, int n, bool train) {
  nn::forward(o, u.conv, s, a, n);
  nn::forward(o, u.bn, s, n, train);
}

}  // namespace

const float* resnet_forward(ResNet& net, ParamStore& s, Arena& a, const float* x, int n, bool train) {
  MLPD_CHECK(n > 0 && n <= net.spec.max_batch, "resnet_forward: batch " + std::to_string(n) +
                                                   " outside [1, max_batch]");
  const OpTable& o = *net.ops;
  copy_to_device(net.spec.device, net.input, x, sizeof(float) * net.input_per_image * size_t(n));
  unit_forward(o, net.stem, s, a, n, train);
  if (net.has_maxpool) nn::forward(o, net.pool, n);
  for (const Block& b : net.blocks) {
    if (b.has_proj) unit_forward(o, b.proj, s, a, n, train);  // the residual the last BN adds
    for (const ConvBn& u : b.main) unit_forward(o, u, s, a, n, train);
  }
  nn::forward(o, net.gap, n);
  nn::forward(o, net.fc, s, n);
  net.last_n = train ? n : 0;
  return net.fc.y;
}

namespace {

struct BufPool {
  float* buf[4];
  bool used[4] = {false, false, false, false};
  float* take() {
    for (int i = 0; i < 4; ++i)
      if (!used[i]) {
        used[i] = true;
        return buf[i];
      }
    MLPD_CHECK(false, "resnet_backward: gradient buffer pool exhausted");
    return nullptr;
  }
  void give(float* p) {
    for (int i = 0; i < 4; ++i)
      if (buf[i] == p) used[i] = false;
  }
};

}  // namespace

void resnet_backward(ResNet& net, ParamStore& s, Arena& a, const float* dlogits, int n,
                     const std::function<void(size_t)>& ready) {
  MLPD_CHECK(n == net.last_n, "resnet_backward: needs a train-mode forward of the same batch");
  const OpTable& o = *net.ops;
  BufPool pool{{net.grad_buf[0], net.grad_buf[1], net.grad_buf[2], net.grad_buf[3]}};
  nn::backward(o, net.fc, s, n, dlogits, net.dfeat);
  ready(net.fc.b);
  ready(net.fc.w);
  float* dout = pool.take();
  nn::backward(o, net.gap, n, net.dfeat, dout);
  auto bn_back = [&](const ConvBn& u, const float* dy, float* dx) {
    nn::backward(o, u.bn, s, a, n, dy, dx);
    ready(u.bn.beta);
    ready(u.bn.gamma);
  };
  for (size_t bi = net.blocks.size(); bi-- > 0;) {
    const Block& b = net.blocks[bi];
    // g = dout masked by the block's final ReLU: the gradient of both the main path's last BN
    // output and of the shortcut.
    float* g = dout;
    o.relu_backward(b.out, g, g, b.out_per_image * size_t(n));
    float* din;
    if (b.has_proj) {
      float* t = pool.take();
      bn_back(b.proj, g, t);
      din = pool.take();
      nn::backward(o, b.proj.conv, s, a, n, t, din, false);
      ready(b.proj.conv.w);
      pool.give(t);
    } else {
      din = g;  // identity shortcut: the main path's input gradient is added onto g at the end
    }
    const float* dy = g;
    for (size_t ui = b.main.size(); ui-- > 0;) {
      const ConvBn& u = b.main[ui];
      float* t = pool.take();
      bn_back(u, dy, t);  // the unit's own ReLU mask (if any) is fused here
      if (dy != g) pool.give(const_cast<float*>(dy));
      if (ui == 0) {
        nn::backward(o, u.conv, s, a, n, t, din, true);
      } else {
        float* dx = pool.take();
        nn::backward(o, u.conv, s, a, n, t, dx, false);
        dy = dx;
      }
      ready(u.conv.w);
      pool.give(t);
    }
    if (din != g) pool.give(g);
    dout = din;
  }
  if (net.has_maxpool) {
    float* d = pool.take();
    nn::backward(o, net.pool, n, dout, d);
    pool.give(dout);
    dout = d;
  }
  float* t = pool.take();
  bn_back(net.stem, dout, t);
  nn::backward(o, net.stem.conv, s, a, n, t, nullptr);
  ready(net.stem.conv.w);
  pool.give(t);
  pool.give(dout);
}

std::string resnet_summary(const ResNet& net) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%s: %zu params, %.2f MFLOPs/image fwd, input %dx%dx%d, %d classes",
                net.spec.variant.c_str(), net.n_params, net.flops / 1e6, net.spec.in_h, net.spec.in_w,
                net.spec.in_c, net.spec.num_classes);
  return buf;
}

double resnet_flops_per_image(const ResNet& net) { return net.flops; }

}  // namespace mlpd

void std::default_delete<mlpd::ResNet>::operator()(mlpd::ResNet* p) const { delete p; }
