#include "workloads/ssd/ssd_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/check.h"
#include "core/rng.h"
#include "kernels/device.h"
#include "nn/conv_bn.h"

namespace mlpd {

namespace {

// One feature map's heads: 3x3 convs to A*classes logits and A*4 offsets per cell.
struct Head {
  nn::Conv2d conf, loc;
  int cells = 0, boxes = 0;  // h*w, boxes per cell
  int prior_offset = 0;      // of its first prior in the concatenated outputs
  float* dfeat = nullptr;    // gradient at the feature map, [max_batch, h*w*c]
  size_t feat_per_image = 0;
};

struct Extra {
  nn::ConvBn reduce, expand;  // 1x1 to mid, 3x3 (strided) to out; both with ReLU
  float* dmid = nullptr;      // gradient at reduce's output
};

}  // namespace

struct Ssd {
  SsdSpec spec;
  const OpTable* ops = nullptr;
  DeviceBuffers buffers;
  float* input = nullptr;
  size_t input_per_image = 0;
  nn::Backbone body;
  std::vector<Extra> extras;
  std::vector<Head> heads;        // one per feature map: the last block's output, then each extra's
  int priors = 0;
  std::vector<float> prior_boxes;  // host [P, 4]
  float* conf = nullptr;           // [max_batch, P, classes]
  float* loc = nullptr;            // [max_batch, P, 4]
  float* dhead_conf = nullptr;     // one head's slice of dconf, [max_batch, cells*A*classes]
  float* dhead_loc = nullptr;
  double flops = 0.0;
  size_t n_params = 0;
  int last_n = 0;
};

SsdSpec ssd_spec(const std::string& variant, int in_h, int in_w, int in_c, int classes, int max_batch) {
  SsdSpec s;
  s.variant = variant;
  s.in_h = in_h;
  s.in_w = in_w;
  s.in_c = in_c;
  s.classes = classes;
  s.max_batch = max_batch;
  if (variant == "ssd_mini") {
    s.stem_channels = 16;
    s.stem_kernel = 3;
    s.stem_stride = 2;
    s.stages = {{32, 1, 2}, {64, 1, 2}};
    s.extras = {{32, 64, 2, 1}, {32, 64, 2, 1}};
    s.maps = {{0.12, 0.28, {2.0}}, {0.28, 0.5, {2.0, 3.0}}, {0.5, 0.72, {2.0, 3.0}}};
  } else if (variant == "ssd300") {
    // MLPerf v0.7 SSD: ResNet-34 conv1..layer3, layer3 without its stride.
    s.stem_channels = 64;
    s.stem_kernel = 7;
    s.stem_stride = 2;
    s.stem_maxpool = true;
    s.stages = {{64, 3, 1}, {128, 4, 2}, {256, 6, 1}};
    s.extras = {{256, 512, 2, 1}, {256, 512, 2, 1}, {128, 256, 2, 1}, {128, 256, 1, 0}, {128, 256, 1, 0}};
    const double sizes[7] = {21, 45, 99, 153, 207, 261, 315};
    const std::vector<std::vector<double>> ars = {{2}, {2, 3}, {2, 3}, {2, 3}, {2}, {2}};
    for (int m = 0; m < 6; ++m) s.maps.push_back({sizes[m] / 300.0, sizes[m + 1] / 300.0, ars[size_t(m)]});
  } else {
    throw UserError("ssd: unknown model '" + variant + "' (ssd_mini or ssd300)", 2);
  }
  return s;
}

namespace {

void add_priors(Ssd& net, const SsdMapSpec& m, int fh, int fw) {
  std::vector<std::pair<double, double>> wh = {{m.scale, m.scale}};
  const double s2 = std::sqrt(m.scale * m.next_scale);
  wh.push_back({s2, s2});
  for (double r : m.aspect_ratios) {
    const double q = std::sqrt(r);
    wh.push_back({m.scale * q, m.scale / q});
    wh.push_back({m.scale / q, m.scale * q});
  }
  for (int i = 0; i < fh; ++i)
    for (int j = 0; j < fw; ++j)
      for (const auto& [w, h] : wh) {
        const double cx = (j + 0.5) / fw, cy = (i + 0.5) / fh;
        net.prior_boxes.push_back(float(cx));
        net.prior_boxes.push_back(float(cy));
        net.prior_boxes.push_back(float(std::clamp(w, 0.0, 1.0)));
        net.prior_boxes.push_back(float(std::clamp(h, 0.0, 1.0)));
      }
}

Head add_head(Ssd& net, ParamStore& s, const std::string& name, const float* feat, int h, int w, int c,
              const SsdMapSpec& m) {
  Head hd;
  hd.cells = h * w;
  hd.boxes = m.boxes_per_cell();
  hd.prior_offset = net.priors;
  hd.conf = nn::make_conv2d(s, name + ".conf", h, w, c, hd.boxes * net.spec.classes, 3, 1, 1, net.spec.max_batch);
  hd.loc = nn::make_conv2d(s, name + ".loc", h, w, c, hd.boxes * 4, 3, 1, 1, net.spec.max_batch);
  const size_t mb = size_t(net.spec.max_batch);
  hd.conf.x = feat;
  hd.conf.y = net.buffers.floats(mb * hd.cells * hd.boxes * net.spec.classes);
  hd.loc.x = feat;
  hd.loc.y = net.buffers.floats(mb * hd.cells * hd.boxes * 4);
  hd.feat_per_image = size_t(hd.cells) * c;
  hd.dfeat = net.buffers.floats(mb * hd.feat_per_image);
  net.flops += nn::conv_flops_per_image(hd.conf) + nn::conv_flops_per_image(hd.loc);
  add_priors(net, m, h, w);
  net.priors += hd.cells * hd.boxes;
  return hd;
}

}  // namespace

std::unique_ptr<Ssd> build_ssd(const SsdSpec& spec, ParamStore& s) {
  MLPD_CHECK(spec.maps.size() == spec.extras.size() + 1, "ssd: one map spec per feature map");
  MLPD_CHECK(!spec.stages.empty() && spec.max_batch > 0 && spec.classes > 1, "ssd: bad spec");
  auto net = std::make_unique<Ssd>();
  Ssd& n = *net;
  n.spec = spec;
  n.ops = &ops_for(spec.device, spec.precision);
  n.buffers.device = spec.device;
  const size_t first_view = s.views.size();
  const nn::ConvBnSpec cb{spec.max_batch, spec.bn_momentum, spec.bn_eps, spec.precision};
  const size_t mb = size_t(spec.max_batch);
  n.input_per_image = size_t(spec.in_h) * spec.in_w * spec.in_c;
  n.input = n.buffers.floats(n.input_per_image * mb);
  n.body = nn::make_backbone(s, n.buffers, cb, n.input, spec.in_h, spec.in_w, spec.in_c, spec.stem_channels,
                             spec.stem_kernel, spec.stem_stride, spec.stem_maxpool);
  for (size_t st = 0; st < spec.stages.size(); ++st)
    for (int b = 0; b < spec.stages[st].blocks; ++b) {
      const bool last = st + 1 == spec.stages.size() && b + 1 == spec.stages[st].blocks;  // the extras read it
      nn::add_basic_block(n.body, s, n.buffers, cb, "layer" + std::to_string(st + 1) + "." + std::to_string(b),
                          spec.stages[st].channels, b == 0 ? spec.stages[st].stride : 1,
                          nn::block_output(last));
    }
  n.flops += n.body.flops;
  const float* x = n.body.out;
  int h = n.body.out_h, w = n.body.out_w, c = n.body.out_c;
  // Heads right after their feature map, so backward (heads of the last map first) finishes views in
  // reverse registration order.
  n.heads.push_back(add_head(n, s, "head0", x, h, w, c, spec.maps[0]));
  for (size_t e = 0; e < spec.extras.size(); ++e) {
    const SsdExtraSpec& es = spec.extras[e];
    Extra ex;
    const std::string name = "extra" + std::to_string(e + 1);
    ex.reduce = nn::make_conv_bn(s, n.buffers, cb, name + ".reduce", x, h, w, c, es.mid, 1, 1, 0, true);
    ex.expand = nn::make_conv_bn(s, n.buffers, cb, name + ".expand", ex.reduce.bn.y, h, w, es.mid, es.out, 3,
                                 es.stride, es.pad, true);
    ex.dmid = n.buffers.floats(mb * ex.reduce.out_per_image);
    n.flops += nn::conv_flops_per_image(ex.reduce.conv) + nn::conv_flops_per_image(ex.expand.conv);
    n.extras.push_back(ex);
    x = n.extras.back().expand.bn.y;
    h = ex.expand.out_h, w = ex.expand.out_w, c = es.out;
    n.heads.push_back(add_head(n, s, "head" + std::to_string(e + 1), x, h, w, c, spec.maps[e + 1]));
  }
  n.conf = n.buffers.floats(mb * size_t(n.priors) * spec.classes);
  n.loc = n.buffers.floats(mb * size_t(n.priors) * 4);
  size_t widest = 0;
  for (const Head& hd : n.heads) widest = std::max(widest, size_t(hd.cells) * hd.boxes);
  n.dhead_conf = n.buffers.floats(mb * widest * spec.classes);
  n.dhead_loc = n.buffers.floats(mb * widest * 4);
  for (size_t v = first_view; v < s.views.size(); ++v) n.n_params += s.views[v].count;
  return net;
}

void init_ssd(Ssd& n, ParamStore& s, uint64_t seed) {
  MLPD_CHECK(!on_device(s), "init_ssd writes the host buffers: call it before place_store_on");
  nn::init_backbone(n.body, s, seed, false);
  for (const Extra& e : n.extras) {
    nn::init_conv_bn(e.reduce, s, seed);
    nn::init_conv_bn(e.expand, s, seed);
  }
  // Heads: Xavier-uniform, as the reference SSD.
  auto xavier = [&](const nn::Conv2d& cv) {
    const ConvDims& d = cv.dims;
    const double bound = std::sqrt(6.0 / (double(d.k) * d.k * (d.c_in + d.c_out)));
    Rng r{seed, cv.w};
    float* p = param_ptr(s, cv.w);
    for (size_t i = 0; i < s.views[cv.w].count; ++i) p[i] = float(bound * (2.0 * r.uniform() - 1.0));
  };
  for (const Head& hd : n.heads) {
    xavier(hd.conf);
    xavier(hd.loc);
  }
}

size_t ssd_arena_bytes(const Ssd& n, int batch) {
  const OpTable& o = *n.ops;
  size_t f = nn::scratch_floats(o, n.body, batch);
  for (const Extra& e : n.extras)
    f = std::max({f, nn::scratch_floats(o, e.reduce, batch), nn::scratch_floats(o, e.expand, batch)});
  for (const Head& hd : n.heads)
    f = std::max({f, nn::scratch_floats(o, hd.conf, batch), nn::scratch_floats(o, hd.loc, batch)});
  return f * sizeof(float) + 4096;
}

int ssd_num_priors(const Ssd& n) { return n.priors; }
const std::vector<float>& ssd_priors(const Ssd& n) { return n.prior_boxes; }

SsdOutputs ssd_forward(Ssd& n, ParamStore& s, Arena& a, const float* x, int batch, bool train) {
  MLPD_CHECK(batch > 0 && batch <= n.spec.max_batch, "ssd_forward: batch outside [1, max_batch]");
  const OpTable& o = *n.ops;
  copy_to_device(n.spec.device, n.input, x, sizeof(float) * n.input_per_image * size_t(batch));
  nn::forward(o, n.body, s, a, batch, train);
  for (const Extra& e : n.extras) {
    nn::forward(o, e.reduce, s, a, batch, train);
    nn::forward(o, e.expand, s, a, batch, train);
  }
  const int classes = n.spec.classes;
  for (const Head& hd : n.heads) {
    nn::forward(o, hd.conf, s, a, batch);
    nn::forward(o, hd.loc, s, a, batch);
    const int per = hd.cells * hd.boxes;
    o.copy_rows(hd.conf.y, per * classes, batch, per * classes, n.conf + size_t(hd.prior_offset) * classes,
                n.priors * classes);
    o.copy_rows(hd.loc.y, per * 4, batch, per * 4, n.loc + size_t(hd.prior_offset) * 4, n.priors * 4);
  }
  n.last_n = train ? batch : 0;
  return {n.conf, n.loc};
}

void ssd_backward(Ssd& n, ParamStore& s, Arena& a, const float* dconf, const float* dloc, int batch,
                  const std::function<void(size_t)>& ready) {
  MLPD_CHECK(batch == n.last_n, "ssd_backward: needs a train-mode forward of the same batch");
  const OpTable& o = *n.ops;
  const int classes = n.spec.classes;
  // Heads of map m add into that map's gradient, which the extra reading map m has already written
  // (the last map's gradient starts with its heads).
  for (size_t m = n.heads.size(); m-- > 0;) {
    const Head& hd = n.heads[m];
    const int per = hd.cells * hd.boxes;
    o.copy_rows(dloc + size_t(hd.prior_offset) * 4, n.priors * 4, batch, per * 4, n.dhead_loc, per * 4);
    o.copy_rows(dconf + size_t(hd.prior_offset) * classes, n.priors * classes, batch, per * classes, n.dhead_conf,
                per * classes);
    const bool last_map = m + 1 == n.heads.size();
    nn::backward(o, hd.loc, s, a, batch, n.dhead_loc, hd.dfeat, !last_map);
    ready(hd.loc.w);
    nn::backward(o, hd.conf, s, a, batch, n.dhead_conf, hd.dfeat, true);
    ready(hd.conf.w);
    if (m == 0) break;
    const Extra& e = n.extras[m - 1];
    nn::backward(o, e.expand, s, a, batch, hd.dfeat, e.dmid, false, ready);
    nn::backward(o, e.reduce, s, a, batch, e.dmid, n.heads[m - 1].dfeat, false, ready);
  }
  nn::backward(o, n.body, s, a, batch, n.heads[0].dfeat, ready);
}

std::string ssd_summary(const Ssd& n) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s: %zu params, %.2f MFLOPs/image fwd, input %dx%dx%d, %d priors, %d classes",
                n.spec.variant.c_str(), n.n_params, n.flops / 1e6, n.spec.in_h, n.spec.in_w, n.spec.in_c, n.priors,
                n.spec.classes);
  return buf;
}

double ssd_flops_per_image(const Ssd& n) { return n.flops; }

size_t ssd_activation_bytes(const Ssd& net) { return net.buffers.bytes; }

}  // namespace mlpd

void std::default_delete<mlpd::Ssd>::operator()(mlpd::Ssd* p) const { delete p; }
