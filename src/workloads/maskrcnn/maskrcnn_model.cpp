#include "workloads/maskrcnn/maskrcnn_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/check.h"
#include "core/rng.h"
#include "nn/conv_bn.h"

namespace mlpd {

namespace {

// A convolution followed by a bias and a ReLU (the heads have no batch norm).
struct ConvBiasRelu {
  nn::Conv2d conv;
  size_t b = 0;             // bias view [c_out]
  int rows_per_item = 0;    // out_h * out_w
  float* y = nullptr;       // conv output, then bias and ReLU in place
  float* dy = nullptr;      // gradient at the conv's output (after the ReLU mask)
};

// The 2x2/2 transposed convolution of the mask head: the data gradient of a 2x2/2 convolution from
// the upsampled map (dims: input [2h, 2w, c_out of this layer], output [h, w, c_in of this layer]),
// so its forward is conv2d_backward_data, its data gradient conv2d_forward and its weight gradient
// conv2d_backward_weights with the roles of x and dy swapped.
struct Deconv2x {
  ConvDims dims;            // the conv it transposes, dims.n the max batch
  size_t w = 0, b = 0;      // w [2, 2, c_out, c_in] (HWIO of that conv), b [c_out]
  const float* x = nullptr; // [n, h, w, c_in]
  float* y = nullptr;       // [n, 2h, 2w, c_out]
  float* dy = nullptr;
};

ConvDims with_n(ConvDims d, int n) {
  d.n = n;
  return d;
}

}  // namespace

struct MaskRcnn {
  MaskRcnnSpec spec;
  const OpTable* ops = nullptr;
  DeviceBuffers buffers;
  float* input = nullptr;
  size_t input_per_image = 0;
  nn::Backbone body;
  int fh = 0, fw = 0, fc = 0, A = 0;
  std::vector<float> anchors;
  float* dfeat = nullptr;  // gradient at the feature map [max_batch, fh, fw, fc]
  // RPN
  ConvBiasRelu rpn_conv;
  nn::Linear rpn_obj, rpn_delta;
  float* drpn_hidden = nullptr;
  // Box head
  float* box_pooled = nullptr;  // [max_rois, pool, pool, fc]
  nn::Linear fc6, fc7, cls, bbox;
  float* dbox_pooled = nullptr;
  float* dfc6 = nullptr;
  float* dfc7 = nullptr;
  // Mask head
  float* mask_pooled = nullptr;  // [max_masks, mp, mp, fc]
  std::vector<ConvBiasRelu> mask_convs;
  Deconv2x deconv;
  nn::Linear mask_pred;          // per pixel: mask_channels -> classes
  float* dmask_pooled = nullptr;
  float* ones = nullptr;         // the bias GEMMs' vector of ones
  size_t ones_count = 0;
  // What backward needs of the last forwards.
  int batch = 0;  // images of the last backbone forward (the RoIs' batch indices are below it)
  int last_n = 0, last_rois = 0, last_masks = 0;
  std::vector<float> box_rois, mask_rois;  // host [R, 5]
  float* box_rois_dev = nullptr;
  float* mask_rois_dev = nullptr;
  double backbone_flops = 0, box_flops = 0, mask_flops = 0;
  size_t n_params = 0;
};

MaskRcnnSpec maskrcnn_spec(const std::string& variant, int in_h, int in_w, int in_c, int classes, int max_batch,
                           int max_rois, int max_masks) {
  MaskRcnnSpec s;
  s.variant = variant;
  s.in_h = in_h;
  s.in_w = in_w;
  s.in_c = in_c;
  s.classes = classes;
  s.max_batch = max_batch;
  s.max_rois = max_rois;
  s.max_masks = max_masks;
  if (variant == "maskrcnn_mini") {
    s.stem_channels = 16;
    s.stem_kernel = 3;
    s.stem_stride = 2;
    s.stages = {{32, 1, 2}, {64, 1, 2}};
    s.anchors.stride = 8;
    s.anchors.sizes = {16, 32, 64};
    s.anchors.ratios = {0.5f, 1.0f, 2.0f};
    s.box_pool = 7;
    s.box_fc = 256;
    s.mask_pool = 14;
    s.mask_channels = 32;
    s.mask_convs = 2;
  } else if (variant == "maskrcnn_r50") {
    // ResNet-50 conv1..layer3 (stride 16) as the single level: the reference's C4 variant's trunk.
    s.stem_channels = 64;
    s.stem_kernel = 7;
    s.stem_stride = 2;
    s.stem_maxpool = true;
    s.bottleneck = true;
    s.stages = {{64, 3, 1}, {128, 4, 2}, {256, 6, 2}};
    s.anchors.stride = 16;
    s.anchors.sizes = {32, 64, 128, 256, 512};
    s.anchors.ratios = {0.5f, 1.0f, 2.0f};
    s.box_pool = 7;
    s.box_fc = 1024;
    s.mask_pool = 14;
    s.mask_channels = 256;
    s.mask_convs = 4;
  } else {
    throw UserError("maskrcnn: unknown model '" + variant + "' (maskrcnn_mini or maskrcnn_r50)", 2);
  }
  return s;
}

namespace {

ConvBiasRelu make_conv_bias_relu(MaskRcnn& n, ParamStore& s, const std::string& name, const float* x, int h, int w,
                                 int c_in, int c_out, int max_items) {
  ConvBiasRelu l;
  l.conv = nn::make_conv2d(s, name, h, w, c_in, c_out, 3, 1, 1, max_items);
  l.b = add_param(s, name + ".bias", size_t(c_out), ParamKind::bias);
  l.conv.x = x;
  l.rows_per_item = h * w;
  l.y = n.buffers.floats(size_t(max_items) * h * w * c_out);
  l.conv.y = l.y;
  l.dy = n.buffers.floats(size_t(max_items) * h * w * c_out);
  return l;
}

// y[rows, c] += ones[rows] * b[c]
void add_bias(const MaskRcnn& n, float* y, int rows, int c, const float* b) {
  MLPD_CHECK(size_t(rows) <= n.ones_count, "maskrcnn: bias rows beyond the ones vector");
  n.ops->gemm(false, false, rows, c, 1, 1.0f, n.ones, 1, b, c, 1.0f, y, c);
}
// db[c] += sum over rows of dy[rows, c]
void bias_backward(const MaskRcnn& n, const float* dy, int rows, int c, float* db) {
  n.ops->gemm(true, false, c, 1, rows, 1.0f, dy, c, n.ones, 1, 1.0f, db, 1);
}

void forward(const MaskRcnn& n, const ConvBiasRelu& l, ParamStore& s, Arena& a, int items) {
  nn::forward(*n.ops, l.conv, s, a, items);
  const int rows = items * l.rows_per_item;
  add_bias(n, l.y, rows, l.conv.dims.c_out, param_ptr(s, l.b));
  n.ops->relu_forward(l.y, l.y, size_t(rows) * l.conv.dims.c_out);
}

// dy_out: gradient at the layer's output; dx (nullable) overwritten unless accumulate.
void backward(const MaskRcnn& n, const ConvBiasRelu& l, ParamStore& s, Arena& a, int items, const float* dy_out,
              float* dx, bool accumulate, const std::function<void(size_t)>& ready) {
  const int rows = items * l.rows_per_item;
  n.ops->relu_backward(l.y, dy_out, l.dy, size_t(rows) * l.conv.dims.c_out);
  bias_backward(n, l.dy, rows, l.conv.dims.c_out, grad_ptr(s, l.b));
  ready(l.b);
  nn::backward(*n.ops, l.conv, s, a, items, l.dy, dx, accumulate);
  ready(l.conv.w);
}

void deconv_forward(const MaskRcnn& n, const Deconv2x& l, ParamStore& s, Arena& a, int items) {
  const ConvDims d = with_n(l.dims, items);
  n.ops->conv2d_backward_data(d, l.x, param_ptr(s, l.w), l.y, a, false);
  const int rows = items * d.h * d.w;
  add_bias(n, l.y, rows, d.c_in, param_ptr(s, l.b));
  n.ops->relu_forward(l.y, l.y, size_t(rows) * d.c_in);
}

void deconv_backward(const MaskRcnn& n, const Deconv2x& l, ParamStore& s, Arena& a, int items, const float* dy_out,
                     float* dx, const std::function<void(size_t)>& ready) {
  const ConvDims d = with_n(l.dims, items);
  const int rows = items * d.h * d.w;
  n.ops->relu_backward(l.y, dy_out, l.dy, size_t(rows) * d.c_in);
  bias_backward(n, l.dy, rows, d.c_in, grad_ptr(s, l.b));
  ready(l.b);
  // y = conv^T(x, W): dW = correlation of dy (the conv's input) with x (the conv's output gradient).
  n.ops->conv2d_backward_weights(d, l.dy, l.x, grad_ptr(s, l.w), a);
  ready(l.w);
  n.ops->conv2d_forward(d, l.dy, param_ptr(s, l.w), dx, a);
}

double linear_flops(const nn::Linear& l) { return 2.0 * l.in * l.out; }

}  // namespace

std::unique_ptr<MaskRcnn> build_maskrcnn(const MaskRcnnSpec& spec, ParamStore& s) {
  MLPD_CHECK(!spec.stages.empty() && spec.max_batch > 0 && spec.classes > 1 && spec.max_rois > 0 &&
                 spec.max_masks > 0,
             "maskrcnn: bad spec");
  auto net = std::make_unique<MaskRcnn>();
  MaskRcnn& n = *net;
  n.spec = spec;
  n.ops = &ops_for(spec.device);
  n.buffers.device = spec.device;
  const size_t first_view = s.views.size();
  const nn::ConvBnSpec cb{spec.max_batch, spec.bn_momentum, spec.bn_eps};
  const size_t mb = size_t(spec.max_batch);
  n.input_per_image = size_t(spec.in_h) * spec.in_w * spec.in_c;
  n.input = n.buffers.floats(n.input_per_image * mb);
  n.body = nn::make_backbone(s, n.buffers, cb, n.input, spec.in_h, spec.in_w, spec.in_c, spec.stem_channels,
                             spec.stem_kernel, spec.stem_stride, spec.stem_maxpool);
  for (size_t st = 0; st < spec.stages.size(); ++st)
    for (int b = 0; b < spec.stages[st].blocks; ++b) {
      const std::string name = "layer" + std::to_string(st + 1) + "." + std::to_string(b);
      const int stride = b == 0 ? spec.stages[st].stride : 1;
      if (spec.bottleneck)
        nn::add_bottleneck_block(n.body, s, n.buffers, cb, name, spec.stages[st].channels, stride);
      else
        nn::add_basic_block(n.body, s, n.buffers, cb, name, spec.stages[st].channels, stride);
    }
  n.fh = n.body.out_h;
  n.fw = n.body.out_w;
  n.fc = n.body.out_c;
  MLPD_CHECK(spec.anchors.stride * n.fh == spec.in_h || spec.anchors.stride * (n.fh - 1) < spec.in_h,
             "maskrcnn: anchor stride does not match the feature map");
  n.A = spec.anchors.per_cell();
  n.anchors = make_anchors(spec.anchors, n.fh, n.fw);
  const size_t cells = size_t(n.fh) * n.fw;
  n.dfeat = n.buffers.floats(mb * cells * n.fc);
  n.backbone_flops = n.body.flops;

  // Rows of the bias GEMMs: the largest of RPN cells, mask-head pixels.
  const int M = 2 * spec.mask_pool;
  n.ones_count = std::max({mb * cells, size_t(spec.max_masks) * M * M, size_t(spec.max_masks) * spec.mask_pool *
                                                                              spec.mask_pool});

  // RPN head.
  n.rpn_conv = make_conv_bias_relu(n, s, "rpn.conv", n.body.out, n.fh, n.fw, n.fc, n.fc, spec.max_batch);
  n.rpn_obj = nn::make_linear(s, "rpn.objectness", n.fc, n.A);
  n.rpn_delta = nn::make_linear(s, "rpn.deltas", n.fc, 4 * n.A);
  n.rpn_obj.x = n.rpn_delta.x = n.rpn_conv.y;
  n.rpn_obj.y = n.buffers.floats(mb * cells * n.A);
  n.rpn_delta.y = n.buffers.floats(mb * cells * n.A * 4);
  n.drpn_hidden = n.buffers.floats(mb * cells * n.fc);
  n.backbone_flops += nn::conv_flops_per_image(n.rpn_conv.conv) +
                      double(cells) * (linear_flops(n.rpn_obj) + linear_flops(n.rpn_delta));

  // Box head.
  const size_t R = size_t(spec.max_rois);
  const int pooled = spec.box_pool * spec.box_pool * n.fc;
  n.box_pooled = n.buffers.floats(R * pooled);
  n.dbox_pooled = n.buffers.floats(R * pooled);
  n.fc6 = nn::make_linear(s, "box.fc6", pooled, spec.box_fc);
  n.fc7 = nn::make_linear(s, "box.fc7", spec.box_fc, spec.box_fc);
  n.cls = nn::make_linear(s, "box.cls", spec.box_fc, spec.classes);
  n.bbox = nn::make_linear(s, "box.deltas", spec.box_fc, 4 * spec.classes);
  n.fc6.x = n.box_pooled;
  n.fc6.y = n.buffers.floats(R * spec.box_fc);
  n.fc7.x = n.fc6.y;
  n.fc7.y = n.buffers.floats(R * spec.box_fc);
  n.cls.x = n.bbox.x = n.fc7.y;
  n.cls.y = n.buffers.floats(R * spec.classes);
  n.bbox.y = n.buffers.floats(R * spec.classes * 4);
  n.dfc6 = n.buffers.floats(R * spec.box_fc);
  n.dfc7 = n.buffers.floats(R * spec.box_fc);
  n.box_flops = linear_flops(n.fc6) + linear_flops(n.fc7) + linear_flops(n.cls) + linear_flops(n.bbox);

  // Mask head.
  const size_t MM = size_t(spec.max_masks);
  const int mp = spec.mask_pool;
  n.mask_pooled = n.buffers.floats(MM * mp * mp * n.fc);
  n.dmask_pooled = n.buffers.floats(MM * mp * mp * n.fc);
  const float* x = n.mask_pooled;
  int c = n.fc;
  for (int i = 0; i < spec.mask_convs; ++i) {
    n.mask_convs.push_back(make_conv_bias_relu(n, s, "mask.conv" + std::to_string(i + 1), x, mp, mp, c,
                                               spec.mask_channels, spec.max_masks));
    x = n.mask_convs.back().y;
    c = spec.mask_channels;
    n.mask_flops += nn::conv_flops_per_image(n.mask_convs.back().conv);
  }
  Deconv2x& dc = n.deconv;
  dc.dims = ConvDims{spec.max_masks, M, M, spec.mask_channels, c, 2, 2, 0};
  dc.w = add_param(s, "mask.deconv.weight", size_t(4) * spec.mask_channels * c, ParamKind::weight);
  dc.b = add_param(s, "mask.deconv.bias", size_t(spec.mask_channels), ParamKind::bias);
  dc.x = x;
  dc.y = n.buffers.floats(MM * M * M * spec.mask_channels);
  dc.dy = n.buffers.floats(MM * M * M * spec.mask_channels);
  n.mask_flops += 2.0 * M * M * c * spec.mask_channels;
  n.mask_pred = nn::make_linear(s, "mask.predictor", spec.mask_channels, spec.classes);
  n.mask_pred.x = dc.y;
  n.mask_pred.y = n.buffers.floats(MM * M * M * spec.classes);
  n.mask_flops += double(M) * M * linear_flops(n.mask_pred);

  n.ones = n.buffers.floats(n.ones_count);
  const std::vector<float> ones(n.ones_count, 1.0f);
  copy_to_device(spec.device, n.ones, ones.data(), sizeof(float) * ones.size());
  n.box_rois_dev = n.buffers.floats(R * 5);
  n.mask_rois_dev = n.buffers.floats(MM * 5);
  for (size_t v = first_view; v < s.views.size(); ++v) n.n_params += s.views[v].count;
  return net;
}

void init_maskrcnn(MaskRcnn& n, ParamStore& s, uint64_t seed) {
  MLPD_CHECK(!on_device(s), "init_maskrcnn writes the host buffers: call it before place_store_on");
  nn::init_backbone(n.body, s, seed, false);
  auto normal = [&](size_t view, double std) {
    Rng r{seed, view};
    float* p = param_ptr(s, view);
    for (size_t i = 0; i < s.views[view].count; ++i) p[i] = float(std * r.normal());
  };
  auto zero = [&](size_t view) { std::fill_n(param_ptr(s, view), s.views[view].count, 0.0f); };
  // maskrcnn-benchmark: RPN and predictors normal(0.01) (box deltas 0.001), biases 0; fc6, fc7
  // Kaiming-uniform with a = 1 (bound sqrt(3 / fan_in)); mask convs Kaiming-normal, fan_out, ReLU.
  normal(n.rpn_conv.conv.w, 0.01);
  zero(n.rpn_conv.b);
  for (const nn::Linear* l : {&n.rpn_obj, &n.rpn_delta, &n.cls}) {
    normal(l->w, 0.01);
    zero(l->b);
  }
  normal(n.bbox.w, 0.001);
  zero(n.bbox.b);
  for (const nn::Linear* l : {&n.fc6, &n.fc7}) {
    const double bound = std::sqrt(3.0 / l->in);
    Rng r{seed, l->w};
    float* p = param_ptr(s, l->w);
    for (size_t i = 0; i < s.views[l->w].count; ++i) p[i] = float(bound * (2.0 * r.uniform() - 1.0));
    zero(l->b);
  }
  for (const ConvBiasRelu& l : n.mask_convs) {
    normal(l.conv.w, std::sqrt(2.0 / (9.0 * l.conv.dims.c_out)));
    zero(l.b);
  }
  normal(n.deconv.w, std::sqrt(2.0 / (4.0 * n.deconv.dims.c_in)));
  zero(n.deconv.b);
  normal(n.mask_pred.w, std::sqrt(2.0 / n.mask_pred.out));
  zero(n.mask_pred.b);
}

size_t maskrcnn_arena_bytes(const MaskRcnn& n) {
  const OpTable& o = *n.ops;
  const int mb = n.spec.max_batch, mm = n.spec.max_masks;
  size_t f = std::max(nn::scratch_floats(o, n.body, mb), nn::scratch_floats(o, n.rpn_conv.conv, mb));
  for (const ConvBiasRelu& l : n.mask_convs) f = std::max(f, nn::scratch_floats(o, l.conv, mm));
  f = std::max(f, o.conv2d_scratch_floats(n.deconv.dims));
  return f * sizeof(float) + 4096;
}

const MaskRcnnSpec& maskrcnn_spec_of(const MaskRcnn& n) { return n.spec; }
int maskrcnn_feature_h(const MaskRcnn& n) { return n.fh; }
int maskrcnn_feature_w(const MaskRcnn& n) { return n.fw; }
const std::vector<float>& maskrcnn_anchors(const MaskRcnn& n) { return n.anchors; }
int maskrcnn_mask_size(const MaskRcnn& n) { return 2 * n.spec.mask_pool; }

RpnOutputs maskrcnn_rpn_forward(MaskRcnn& n, ParamStore& s, Arena& a, const float* x, int batch, bool train) {
  MLPD_CHECK(batch > 0 && batch <= n.spec.max_batch, "maskrcnn_rpn_forward: batch outside [1, max_batch]");
  const OpTable& o = *n.ops;
  copy_to_device(n.spec.device, n.input, x, sizeof(float) * n.input_per_image * size_t(batch));
  nn::forward(o, n.body, s, a, batch, train);
  forward(n, n.rpn_conv, s, a, batch);
  const int rows = batch * n.fh * n.fw;
  nn::forward(o, n.rpn_obj, s, rows);
  nn::forward(o, n.rpn_delta, s, rows);
  n.batch = batch;
  n.last_n = train ? batch : 0;
  n.last_rois = n.last_masks = 0;
  return {n.rpn_obj.y, n.rpn_delta.y};
}

namespace {

// rois host [R, 5] -> where the ops read them; batch indices checked against the last forward.
const float* upload_rois(const MaskRcnn& n, const float* rois, int count, float* dev) {
  for (int i = 0; i < count; ++i)
    MLPD_CHECK(rois[size_t(i) * 5] >= 0 && rois[size_t(i) * 5] < float(n.batch), "maskrcnn: RoI batch index out of range");
  copy_to_device(n.spec.device, dev, rois, sizeof(float) * size_t(count) * 5);
  return n.spec.device == Device::cpu ? rois : dev;
}

}  // namespace

BoxHeadOutputs maskrcnn_box_forward(MaskRcnn& n, ParamStore& s, Arena& /*a*/, const float* rois, int count) {
  MLPD_CHECK(count > 0 && count <= n.spec.max_rois, "maskrcnn_box_forward: RoIs outside [1, max_rois]");
  MLPD_CHECK(n.batch > 0, "maskrcnn_box_forward: needs a backbone forward first");
  const OpTable& o = *n.ops;
  n.box_rois.assign(rois, rois + size_t(count) * 5);
  const float* r = upload_rois(n, n.box_rois.data(), count, n.box_rois_dev);
  o.roi_align_forward(n.body.out, n.batch, n.fh, n.fw, n.fc, r, count, n.spec.box_pool, n.spec.box_pool,
                      1.0f / float(n.spec.anchors.stride), n.spec.sampling_ratio, false, n.box_pooled);
  nn::forward(o, n.fc6, s, count);
  o.relu_forward(n.fc6.y, n.fc6.y, size_t(count) * n.fc6.out);
  nn::forward(o, n.fc7, s, count);
  o.relu_forward(n.fc7.y, n.fc7.y, size_t(count) * n.fc7.out);
  nn::forward(o, n.cls, s, count);
  nn::forward(o, n.bbox, s, count);
  n.last_rois = count;
  return {n.cls.y, n.bbox.y};
}

const float* maskrcnn_mask_forward(MaskRcnn& n, ParamStore& s, Arena& a, const float* rois, int count) {
  MLPD_CHECK(count > 0 && count <= n.spec.max_masks, "maskrcnn_mask_forward: RoIs outside [1, max_masks]");
  MLPD_CHECK(n.batch > 0, "maskrcnn_mask_forward: needs a backbone forward first");
  const OpTable& o = *n.ops;
  n.mask_rois.assign(rois, rois + size_t(count) * 5);
  const float* r = upload_rois(n, n.mask_rois.data(), count, n.mask_rois_dev);
  const int mp = n.spec.mask_pool, M = 2 * mp;
  o.roi_align_forward(n.body.out, n.batch, n.fh, n.fw, n.fc, r, count, mp, mp,
                      1.0f / float(n.spec.anchors.stride), n.spec.sampling_ratio, false, n.mask_pooled);
  for (const ConvBiasRelu& l : n.mask_convs) forward(n, l, s, a, count);
  deconv_forward(n, n.deconv, s, a, count);
  nn::forward(o, n.mask_pred, s, count * M * M);
  n.last_masks = count;
  return n.mask_pred.y;
}

void maskrcnn_backward(MaskRcnn& n, ParamStore& s, Arena& a, const MaskRcnnGrads& g,
                       const std::function<void(size_t)>& ready) {
  MLPD_CHECK(n.last_n > 0, "maskrcnn_backward: needs a train-mode forward");
  const OpTable& o = *n.ops;
  const int batch = n.last_n;
  const size_t feat = size_t(batch) * n.fh * n.fw * n.fc;
  zero_on(n.spec.device, n.dfeat, sizeof(float) * feat);
  const float scale = 1.0f / float(n.spec.anchors.stride);
  // Mask head (registered last: its views finish first).
  const int mp = n.spec.mask_pool, M = 2 * mp;
  const int masks = g.mask_logits ? n.last_masks : 0;
  if (masks > 0) {
    nn::backward(o, n.mask_pred, s, masks * M * M, g.mask_logits, n.deconv.dy);
    ready(n.mask_pred.b);
    ready(n.mask_pred.w);
    // deconv.dy now holds the gradient at the deconv's output; its backward reads it as dy_out.
    float* dlast = n.mask_convs.empty() ? n.dmask_pooled : n.mask_convs.back().dy;
    deconv_backward(n, n.deconv, s, a, masks, n.deconv.dy, dlast, ready);
    for (size_t i = n.mask_convs.size(); i-- > 0;) {
      float* dx = i == 0 ? n.dmask_pooled : n.mask_convs[i - 1].dy;
      backward(n, n.mask_convs[i], s, a, masks, n.mask_convs[i].dy, dx, false, ready);
    }
    const float* r = n.spec.device == Device::cpu ? n.mask_rois.data() : n.mask_rois_dev;
    o.roi_align_backward(n.dmask_pooled, batch, n.fh, n.fw, n.fc, r, masks, mp, mp, scale, n.spec.sampling_ratio,
                         false, n.dfeat);
  } else {
    for (size_t v : {n.mask_pred.b, n.mask_pred.w, n.deconv.b, n.deconv.w}) ready(v);
    for (size_t i = n.mask_convs.size(); i-- > 0;) {
      ready(n.mask_convs[i].b);
      ready(n.mask_convs[i].conv.w);
    }
  }
  // Box head.
  const int rois = g.cls_logits ? n.last_rois : 0;
  if (rois > 0) {
    nn::backward(o, n.bbox, s, rois, g.box_deltas, n.dfc7);
    ready(n.bbox.b);
    ready(n.bbox.w);
    // fc7's output gradient is the sum of both predictors' input gradients.
    nn::backward(o, n.cls, s, rois, g.cls_logits, n.dfc6);
    o.add_forward(n.dfc7, n.dfc6, n.dfc7, size_t(rois) * n.fc7.out);
    ready(n.cls.b);
    ready(n.cls.w);
    o.relu_backward(n.fc7.y, n.dfc7, n.dfc7, size_t(rois) * n.fc7.out);
    nn::backward(o, n.fc7, s, rois, n.dfc7, n.dfc6);
    ready(n.fc7.b);
    ready(n.fc7.w);
    o.relu_backward(n.fc6.y, n.dfc6, n.dfc6, size_t(rois) * n.fc6.out);
    nn::backward(o, n.fc6, s, rois, n.dfc6, n.dbox_pooled);
    ready(n.fc6.b);
    ready(n.fc6.w);
    const float* r = n.spec.device == Device::cpu ? n.box_rois.data() : n.box_rois_dev;
    o.roi_align_backward(n.dbox_pooled, batch, n.fh, n.fw, n.fc, r, rois, n.spec.box_pool, n.spec.box_pool, scale,
                         n.spec.sampling_ratio, false, n.dfeat);
  } else {
    for (const nn::Linear* l : {&n.bbox, &n.cls, &n.fc7, &n.fc6}) {
      ready(l->b);
      ready(l->w);
    }
  }
  // RPN head: its hidden layer's gradient is the sum of both predictors'.
  const int rows = batch * n.fh * n.fw;
  nn::backward(o, n.rpn_delta, s, rows, g.rpn_deltas, n.rpn_conv.dy);
  ready(n.rpn_delta.b);
  ready(n.rpn_delta.w);
  nn::backward(o, n.rpn_obj, s, rows, g.objectness, n.drpn_hidden);
  o.add_forward(n.drpn_hidden, n.rpn_conv.dy, n.drpn_hidden, size_t(rows) * n.fc);
  ready(n.rpn_obj.b);
  ready(n.rpn_obj.w);
  backward(n, n.rpn_conv, s, a, batch, n.drpn_hidden, n.dfeat, true, ready);
  nn::backward(o, n.body, s, a, batch, n.dfeat, ready);
  n.last_n = 0;
}

std::string maskrcnn_summary(const MaskRcnn& n) {
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "%s: %zu params, %.2f MFLOPs/image fwd (backbone + RPN), %.2f MFLOPs/RoI box head, %.2f MFLOPs/RoI "
                "mask head, input %dx%dx%d, feature map %dx%dx%d, %d anchors, %d classes",
                n.spec.variant.c_str(), n.n_params, n.backbone_flops / 1e6, n.box_flops / 1e6, n.mask_flops / 1e6,
                n.spec.in_h, n.spec.in_w, n.spec.in_c, n.fh, n.fw, n.fc, int(n.anchors.size() / 4), n.spec.classes);
  return buf;
}

double maskrcnn_backbone_flops(const MaskRcnn& n) { return n.backbone_flops; }
double maskrcnn_box_flops_per_roi(const MaskRcnn& n) { return n.box_flops; }
double maskrcnn_mask_flops_per_roi(const MaskRcnn& n) { return n.mask_flops; }

}  // namespace mlpd

void std::default_delete<mlpd::MaskRcnn>::operator()(mlpd::MaskRcnn* p) const { delete p; }
