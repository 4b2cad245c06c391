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
#include "nn/conv_bn.h"

namespace mlpd {

struct ResNet {
  ResNetSpec spec;
  nn::Backbone body;
  nn::GlobalAvgPool gap;
  nn::Linear fc;
  const OpTable* ops = nullptr;       // the spec's device
  DeviceBuffers buffers;              // activations and their gradients, on the spec's device
  float* input = nullptr;
  size_t input_per_image = 0;
  float* dfeat = nullptr;             // gradient at the pooled features
  float* dgap_in = nullptr;           // gradient at the last block's output
  double flops = 0;
  size_t n_params = 0;
  int last_n = 0;
};

std::unique_ptr<ResNet> build_resnet(const ResNetSpec& spec, ParamStore& s) {
  MLPD_CHECK(spec.variant == "resnet20" || spec.variant == "resnet50",
             "resnet: unknown variant '" + spec.variant + "' (resnet20 or resnet50)");
  MLPD_CHECK(spec.max_batch > 0 && spec.in_h > 0 && spec.in_w > 0 && spec.in_c > 0 &&
                 spec.num_classes > 0 && spec.blocks_per_stage > 0,
             "resnet: bad spec");
  auto net = std::make_unique<ResNet>();
  net->spec = spec;
  net->ops = &ops_for(spec.device, spec.precision);
  net->buffers.device = spec.device;
  const size_t mb = size_t(spec.max_batch);
  const nn::ConvBnSpec cb{spec.max_batch, spec.bn_momentum, spec.bn_epsilon, spec.precision};
  const size_t first_param = s.views.size();
  net->input_per_image = size_t(spec.in_h) * spec.in_w * spec.in_c;
  net->input = net->buffers.floats(net->input_per_image * mb);
  nn::Backbone& body = net->body;
  // The head reads the last block's output; the others are read by the next block alone.
  if (spec.variant == "resnet20") {
    body = nn::make_backbone(s, net->buffers, cb, net->input, spec.in_h, spec.in_w, spec.in_c, 16, 3, 1, false);
    const int widths[3] = {16, 32, 64};
    for (int st = 0; st < 3; ++st)
      for (int b = 0; b < spec.blocks_per_stage; ++b)
        nn::add_basic_block(body, s, net->buffers, cb, "layer" + std::to_string(st + 1) + "." + std::to_string(b),
                            widths[st], (st > 0 && b == 0) ? 2 : 1,
                            nn::block_output(st == 2 && b + 1 == spec.blocks_per_stage));
  } else {
    body = nn::make_backbone(s, net->buffers, cb, net->input, spec.in_h, spec.in_w, spec.in_c, 64, 7, 2, true);
    const int counts[4] = {3, 4, 6, 3};
    const int widths[4] = {64, 128, 256, 512};
    for (int st = 0; st < 4; ++st)
      for (int b = 0; b < counts[st]; ++b)
        nn::add_bottleneck_block(body, s, net->buffers, cb,
                                 "layer" + std::to_string(st + 1) + "." + std::to_string(b), widths[st],
                                 (st > 0 && b == 0) ? 2 : 1, nn::block_output(st == 3 && b + 1 == counts[st]));
  }
  net->flops = body.flops;
  const int h = body.out_h, w = body.out_w, c = body.out_c;
  const float* x = body.out;
  net->gap.hw = h * w;
  net->gap.c = c;
  net->gap.x = x;
  net->gap.y = net->buffers.floats(mb * c);
  net->fc = nn::make_linear(s, "fc", c, spec.num_classes);
  net->fc.x = net->gap.y;
  net->fc.y = net->buffers.floats(mb * spec.num_classes);
  net->flops += 2.0 * double(c) * spec.num_classes;
  net->dfeat = net->buffers.floats(mb * c);
  net->dgap_in = net->buffers.floats(mb * size_t(h) * w * c);
  for (size_t v = first_param; v < s.views.size(); ++v) net->n_params += s.views[v].count;
  return net;
}

void init_resnet(ResNet& net, ParamStore& s, uint64_t seed) {
  MLPD_CHECK(s.finalized, "init_resnet before finalize_params");
  MLPD_CHECK(!on_device(s), "init_resnet writes the host buffers: call it before place_store_on");
  nn::init_backbone(net.body, s, seed, net.spec.zero_init_residual_gamma);
  // Linear weight and bias uniform(+-1/sqrt(fan_in)); view v draws from Rng{seed, v}.
  const float bound = 1.0f / std::sqrt(float(net.fc.in));
  for (size_t view : {net.fc.w, net.fc.b}) {
    Rng r{seed, view};
    float* p = param_ptr(s, view);
    for (size_t i = 0; i < s.views[view].count; ++i) p[i] = bound * (2.0f * r.uniform() - 1.0f);
  }
}

size_t resnet_arena_bytes(const ResNet& net, int batch) {
  return nn::scratch_floats(*net.ops, net.body, batch) * sizeof(float) + 4096;
}

const float* resnet_forward(ResNet& net, ParamStore& s, Arena& a, const float* x, int n, bool train) {
  MLPD_CHECK(n > 0 && n <= net.spec.max_batch, "resnet_forward: batch " + std::to_string(n) +
                                                   " outside [1, max_batch]");
  const OpTable& o = *net.ops;
  copy_to_device(net.spec.device, net.input, x, sizeof(float) * net.input_per_image * size_t(n));
  nn::forward(o, net.body, s, a, n, train);
  nn::forward(o, net.gap, n);
  nn::forward(o, net.fc, s, n);
  net.last_n = train ? n : 0;
  return net.fc.y;
}

void resnet_backward(ResNet& net, ParamStore& s, Arena& a, const float* dlogits, int n,
                     const std::function<void(size_t)>& ready) {
  MLPD_CHECK(n == net.last_n, "resnet_backward: needs a train-mode forward of the same batch");
  const OpTable& o = *net.ops;
  nn::backward(o, net.fc, s, n, dlogits, net.dfeat);
  ready(net.fc.b);
  ready(net.fc.w);
  nn::backward(o, net.gap, n, net.dfeat, net.dgap_in);
  nn::backward(o, net.body, s, a, n, net.dgap_in, ready);
}

std::string resnet_summary(const ResNet& net) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%s: %zu params, %.2f MFLOPs/image fwd, input %dx%dx%d, %d classes",
                net.spec.variant.c_str(), net.n_params, net.flops / 1e6, net.spec.in_h, net.spec.in_w,
                net.spec.in_c, net.spec.num_classes);
  return buf;
}

double resnet_flops_per_image(const ResNet& net) { return net.flops; }

size_t resnet_activation_bytes(const ResNet& net) { return net.buffers.bytes; }

}  // namespace mlpd

void std::default_delete<mlpd::ResNet>::operator()(mlpd::ResNet* p) const { delete p; }
