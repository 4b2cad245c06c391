#include "workloads/minigo/minigo_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "kernels/device.h"
#include "nn/conv_bn.h"

namespace mlpd {

struct MinigoNet {
  MinigoNetSpec spec;
  const OpTable* ops = nullptr;
  DeviceBuffers buffers;
  float* input = nullptr;
  size_t input_per_image = 0;
  nn::Backbone tower;
  nn::ConvBn policy_conv, value_conv;  // 1x1, with ReLU
  nn::Linear policy_fc, value_fc1, value_fc2;
  float* value_hidden = nullptr;       // relu(value_fc1), [max_batch, hidden]
  float* dtrunk = nullptr;             // gradient at the tower's output
  float* dpolicy_feat = nullptr;       // [max_batch, board*board*2]
  float* dvalue_feat = nullptr;        // [max_batch, board*board]
  float* dvalue_hidden = nullptr;
  double flops = 0.0;
  size_t n_params = 0;
  int last_n = 0;
};

std::unique_ptr<MinigoNet> build_minigo_net(const MinigoNetSpec& spec, ParamStore& s) {
  MLPD_CHECK(spec.board >= 5 && spec.board <= 19 && spec.planes > 0 && spec.channels > 0 && spec.blocks >= 0 &&
                 spec.max_batch > 0 && spec.value_hidden > 0,
             "minigo net: bad spec");
  auto net = std::make_unique<MinigoNet>();
  MinigoNet& n = *net;
  n.spec = spec;
  n.ops = &ops_for(spec.device, spec.precision);
  n.buffers.device = spec.device;
  const size_t mb = size_t(spec.max_batch);
  const int b = spec.board, cells = b * b;
  const nn::ConvBnSpec cb{spec.max_batch, spec.bn_momentum, spec.bn_eps, spec.precision};
  const size_t first_view = s.views.size();
  n.input_per_image = size_t(cells) * spec.planes;
  n.input = n.buffers.floats(n.input_per_image * mb);
  n.tower = nn::make_backbone(s, n.buffers, cb, n.input, b, b, spec.planes, spec.channels, 3, 1, false);
  for (int i = 0; i < spec.blocks; ++i)  // the heads read the last block's output
    nn::add_basic_block(n.tower, s, n.buffers, cb, "block" + std::to_string(i), spec.channels, 1,
                        nn::block_output(i + 1 == spec.blocks));
  n.flops += n.tower.flops;
  const float* x = n.tower.out;
  n.policy_conv = nn::make_conv_bn(s, n.buffers, cb, "policy", x, b, b, spec.channels, 2, 1, 1, 0, true);
  n.policy_fc = nn::make_linear(s, "policy.fc", 2 * cells, spec.moves());
  n.policy_fc.x = n.policy_conv.bn.y;
  n.policy_fc.y = n.buffers.floats(mb * size_t(spec.moves()));
  n.value_conv = nn::make_conv_bn(s, n.buffers, cb, "value", x, b, b, spec.channels, 1, 1, 1, 0, true);
  n.value_fc1 = nn::make_linear(s, "value.fc1", cells, spec.value_hidden);
  n.value_fc1.x = n.value_conv.bn.y;
  n.value_fc1.y = n.buffers.floats(mb * size_t(spec.value_hidden));
  n.value_hidden = n.buffers.floats(mb * size_t(spec.value_hidden));
  n.value_fc2 = nn::make_linear(s, "value.fc2", spec.value_hidden, 1);
  n.value_fc2.x = n.value_hidden;
  n.value_fc2.y = n.buffers.floats(mb);
  n.flops += nn::conv_flops_per_image(n.policy_conv.conv) + nn::conv_flops_per_image(n.value_conv.conv) +
             2.0 * (2.0 * cells * spec.moves() + double(cells) * spec.value_hidden + spec.value_hidden);
  n.dtrunk = n.buffers.floats(mb * size_t(cells) * spec.channels);
  n.dpolicy_feat = n.buffers.floats(mb * size_t(cells) * 2);
  n.dvalue_feat = n.buffers.floats(mb * size_t(cells));
  n.dvalue_hidden = n.buffers.floats(mb * size_t(spec.value_hidden));
  for (size_t v = first_view; v < s.views.size(); ++v) n.n_params += s.views[v].count;
  return net;
}

void init_minigo_net(MinigoNet& n, ParamStore& s, uint64_t seed) {
  MLPD_CHECK(!on_device(s), "init_minigo_net writes the host buffers: call it before place_store_on");
  nn::init_backbone(n.tower, s, seed, false);
  nn::init_conv_bn(n.policy_conv, s, seed);
  nn::init_conv_bn(n.value_conv, s, seed);
  // Linear layers uniform(+-1/sqrt(fan_in)), weight and bias, as PyTorch's default.
  for (const nn::Linear* l : {&n.policy_fc, &n.value_fc1, &n.value_fc2}) {
    const float bound = 1.0f / std::sqrt(float(l->in));
    for (size_t view : {l->w, l->b}) {
      Rng r{seed, view};
      float* p = param_ptr(s, view);
      for (size_t i = 0; i < s.views[view].count; ++i) p[i] = bound * (2.0f * r.uniform() - 1.0f);
    }
  }
}

size_t minigo_arena_bytes(const MinigoNet& n, int batch) {
  const OpTable& o = *n.ops;
  const size_t f = std::max({nn::scratch_floats(o, n.tower, batch), nn::scratch_floats(o, n.policy_conv, batch),
                             nn::scratch_floats(o, n.value_conv, batch)});
  return f * sizeof(float) + 4096;
}

MinigoOutputs minigo_forward(MinigoNet& n, ParamStore& s, Arena& a, const float* x, int batch, bool train) {
  MLPD_CHECK(batch > 0 && batch <= n.spec.max_batch, "minigo_forward: batch outside [1, max_batch]");
  const OpTable& o = *n.ops;
  copy_to_device(n.spec.device, n.input, x, sizeof(float) * n.input_per_image * size_t(batch));
  nn::forward(o, n.tower, s, a, batch, train);
  nn::forward(o, n.policy_conv, s, a, batch, train);
  nn::forward(o, n.policy_fc, s, batch);
  nn::forward(o, n.value_conv, s, a, batch, train);
  nn::forward(o, n.value_fc1, s, batch);
  o.relu_forward(n.value_fc1.y, n.value_hidden, size_t(batch) * n.spec.value_hidden);
  nn::forward(o, n.value_fc2, s, batch);
  n.last_n = train ? batch : 0;
  return {n.policy_fc.y, n.value_fc2.y};
}

void minigo_backward(MinigoNet& n, ParamStore& s, Arena& a, const float* dpolicy, const float* dvalue, int batch,
                     const std::function<void(size_t)>& ready) {
  MLPD_CHECK(batch == n.last_n, "minigo_backward: needs a train-mode forward of the same batch");
  const OpTable& o = *n.ops;
  // Value head (registered last), then the policy head, then the tower.
  nn::backward(o, n.value_fc2, s, batch, dvalue, n.dvalue_hidden);
  ready(n.value_fc2.b);
  ready(n.value_fc2.w);
  o.relu_backward(n.value_hidden, n.dvalue_hidden, n.dvalue_hidden, size_t(batch) * n.spec.value_hidden);
  nn::backward(o, n.value_fc1, s, batch, n.dvalue_hidden, n.dvalue_feat);
  ready(n.value_fc1.b);
  ready(n.value_fc1.w);
  nn::backward(o, n.value_conv, s, a, batch, n.dvalue_feat, n.dtrunk, false, ready);
  nn::backward(o, n.policy_fc, s, batch, dpolicy, n.dpolicy_feat);
  ready(n.policy_fc.b);
  ready(n.policy_fc.w);
  nn::backward(o, n.policy_conv, s, a, batch, n.dpolicy_feat, n.dtrunk, true, ready);
  nn::backward(o, n.tower, s, a, batch, n.dtrunk, ready);
}

std::string minigo_summary(const MinigoNet& n) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "minigo net: %dx%d board, %d planes, %d blocks of %d channels, %zu params, %.2f MFLOPs/position fwd",
                n.spec.board, n.spec.board, n.spec.planes, n.spec.blocks, n.spec.channels, n.n_params, n.flops / 1e6);
  return buf;
}

double minigo_flops_per_position(const MinigoNet& n) { return n.flops; }

size_t minigo_activation_bytes(const MinigoNet& net) { return net.buffers.bytes; }

}  // namespace mlpd

void std::default_delete<mlpd::MinigoNet>::operator()(mlpd::MinigoNet* p) const { delete p; }
