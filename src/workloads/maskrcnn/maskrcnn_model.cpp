#include "workloads/maskrcnn/maskrcnn_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/check.h"
#include "core/rng.h"
#include "nn/bf16_storage.h"
#include "nn/conv_bn.h"

namespace mlpd {

namespace {

// A convolution followed by a bias and a ReLU (the heads and the FPN have no batch norm; the FPN's
// convolutions have no ReLU). Under bf16 storage the RPN's and the mask head's keep their output as
// bf16: only convolutions and linears read it, and its own ReLU mask (nn/bf16_storage.h).
struct ConvBiasRelu {
  nn::Conv2d conv;                 // conv.y unused (out is the output); conv.x null where x16 is set
  size_t b = 0;                    // bias view [c_out]
  int rows_per_item = 0;           // out_h * out_w
  bool relu = true;
  nn::SavedActivation out;         // conv output, then bias and ReLU in place
  const uint16_t* x16 = nullptr;   // the input, where the layer before keeps it as bf16
  float* y() const { return out.f32; }  // the output of a layer that keeps it in fp32 (the FPN's)
  const ConvDims& conv_dims() const { return conv.dims; }
  static constexpr Bf16Operand kept_input = Bf16Operand::image;
};

// One level the RPN reads; the first `pooled levels` are also where RoIAlign pools from. Level 0's
// RPN layers register the views, the other levels' are copies reading and writing their own maps.
struct FeatureLevel {
  const float* feat = nullptr;  // [max_batch, h, w, fc]
  float* dfeat = nullptr;       // gradient at feat
  int h = 0, w = 0, stride = 0;
  size_t anchor_begin = 0;      // this level's first anchor in an image's list
  ConvBiasRelu rpn_conv;
  nn::Linear rpn_obj, rpn_delta;  // x: the RPN conv's output, set where it is read
  float* drpn_hidden = nullptr;
  float* dobj = nullptr;        // this level's share of the output gradients (several levels only)
  float* ddelta = nullptr;
  int cells() const { return h * w; }
};

struct HeadPooling {
  int pool = 0, max_rois = 0;
  nn::SavedActivation pooled;  // [max_rois, pool, pool, fc]: only the head's first layer reads it
  float* rois = nullptr;       // [max_rois, 5], the model's memory: the last forward's RoIs
};

// The FPN's layers, finest level first; lateral[l].y() holds the inner map (lateral + top-down).
struct Fpn {
  std::vector<ConvBiasRelu> lateral, output;
  std::vector<float*> up;       // the level above's inner map upsampled to this level (all but the top)
  std::vector<float*> dinner;   // gradient at each inner map
  std::vector<float*> dstage;   // gradient at each stage output, from its lateral
  std::vector<const float*> stage_out;
  std::vector<int> stage_block;  // the backbone block giving each stage output
  std::vector<int> stage_c;
  PoolDims top_pool;            // P5 -> P6
  float* top = nullptr;         // P6
  float* dtop_tmp = nullptr;    // P6's gradient brought to P5's size
};

// The 2x2/2 transposed convolution of the mask head: the data gradient of a 2x2/2 convolution from
// the upsampled map (dims: input [2h, 2w, c_out of this layer], output [h, w, c_in of this layer]),
// so its forward is conv2d_backward_data, its data gradient conv2d_forward and its weight gradient
// conv2d_backward_weights with the roles of x and dy swapped.
struct Deconv2x {
  ConvDims dims;                   // the conv it transposes, dims.n the max batch
  size_t w = 0, b = 0;             // w [2, 2, c_out, c_in] (HWIO of that conv), b [c_out]
  const float* x = nullptr;        // [n, h, w, c_in], or x16 where the layer before keeps it as bf16
  const uint16_t* x16 = nullptr;
  nn::SavedActivation out;         // [n, 2h, 2w, c_out]: only the predictor and the ReLU mask read it
  const ConvDims& conv_dims() const { return dims; }
  static constexpr Bf16Operand kept_input = Bf16Operand::output_gradient;  // its input is the conv's dy
};

using nn::with_n;

}  // namespace

struct MaskRcnn {
  MaskRcnnSpec spec;
  const OpTable* ops = nullptr;
  DeviceBuffers buffers;
  float* input = nullptr;
  size_t input_per_image = 0;
  nn::Backbone body;
  Fpn fpn;
  int fh = 0, fw = 0, fc = 0, A = 0;  // fh, fw: level 0's; A anchors per cell of a level
  std::vector<float> anchors;
  std::vector<FeatureLevel> levels;
  int pooled_levels = 1;
  size_t total_anchors = 0;                      // per image
  float* rpn_obj_all = nullptr;                  // [max_batch, total_anchors] (several levels only)
  float* rpn_delta_all = nullptr;                // [max_batch, total_anchors, 4]
  HeadPooling box_pool, mask_pool;
  // Box head (fc6 reads box_pool.pooled)
  nn::Linear fc6, fc7, cls, bbox;
  float* dfc6 = nullptr;
  float* dfc7 = nullptr;
  // Mask head (the first conv reads mask_pool.pooled)
  std::vector<ConvBiasRelu> mask_convs;
  Deconv2x deconv;
  nn::Linear mask_pred;          // per pixel: mask_channels -> classes; x: the deconv's output
  // Its backward's gradients take turns in two Arena buffers: [0] at the deconv's output, [1] at the
  // last conv's, [0] at the one before, ..., and at the pooled input; values per RoI of each.
  size_t mask_grad_per_item[2] = {0, 0};
  float* ones = nullptr;         // the bias GEMMs' vector of ones
  size_t ones_count = 0;
  // What backward needs of the last forwards.
  int batch = 0;  // images of the last backbone forward (the RoIs' batch indices are below it)
  int last_n = 0, last_rois = 0, last_masks = 0;
  double backbone_flops = 0, box_flops = 0, mask_flops = 0;
  size_t n_params = 0;
  bool keeps_bf16() const { return spec.precision == Precision::bf16 && spec.bf16_storage; }
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
    // R-50-FPN (maskrcnn-benchmark's e2e_mask_rcnn_R_50_FPN_1x): P2..P5 from layer1..layer4 and P6,
    // one anchor size per level.
    s.stem_channels = 64;
    s.stem_kernel = 7;
    s.stem_stride = 2;
    s.stem_maxpool = true;
    s.bottleneck = true;
    s.stages = {{64, 3, 1}, {128, 4, 2}, {256, 6, 2}, {512, 3, 2}};
    s.fpn = true;
    s.fpn_channels = 256;
    s.anchors.stride = 4;
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

// A k x k convolution (stride 1, same padding) + bias (+ ReLU) over x [max_items, h, w, c_in] (or
// x16, kept as bf16); keep_bf16: keep the output as bf16 (a ReLU output only convolutions and
// linears read).
ConvBiasRelu make_conv_bias_relu(MaskRcnn& n, ParamStore& s, const std::string& name, const float* x,
                                 const uint16_t* x16, int h, int w, int c_in, int c_out, int k, int max_items,
                                 bool relu, bool keep_bf16) {
  MLPD_CHECK(relu || !keep_bf16, "maskrcnn: only a ReLU output is kept as bf16");
  ConvBiasRelu l;
  l.conv = nn::make_conv2d(s, name, h, w, c_in, c_out, k, 1, k / 2, max_items);
  l.b = add_param(s, name + ".bias", size_t(c_out), ParamKind::bias);
  l.conv.x = x;
  l.x16 = x16;
  l.rows_per_item = h * w;
  l.relu = relu;
  l.out = nn::make_saved_activation(n.buffers, size_t(h) * w * c_out, max_items, keep_bf16);
  return l;
}

// The same layer (its views) over another map of the same channels, with buffers of its own.
ConvBiasRelu share_conv_bias_relu(MaskRcnn& n, const ConvBiasRelu& l0, const float* x, int h, int w, int max_items) {
  ConvBiasRelu l = l0;
  l.conv.dims.h = h;
  l.conv.dims.w = w;
  l.conv.x = x;
  l.rows_per_item = h * w;
  l.out = nn::make_saved_activation(n.buffers, size_t(h) * w * l0.conv.dims.c_out, max_items, l0.out.b16 != nullptr);
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

// Returns the output in fp32: the layer's own buffer, or (bf16 storage) Arena scratch that stays
// the caller's until its ArenaScope ends. x: the input in fp32 where the caller still holds it
// (else the layer's own, or its bf16 copy, read as it is).
const float* forward(const MaskRcnn& n, const ConvBiasRelu& l, ParamStore& s, Arena& a, int items,
                     const float* x = nullptr) {
  nn::Conv2d conv = l.conv;
  float* y = nn::write_target(l.out, a, items);
  conv.y = y;
  if (!x && l.x16) {
    nn::forward_image_bf16(*n.ops, conv, l.x16, s, a, items);
  } else {
    conv.x = x ? x : l.conv.x;
    nn::forward(*n.ops, conv, s, a, items);
  }
  const int rows = items * l.rows_per_item;
  add_bias(n, y, rows, l.conv.dims.c_out, param_ptr(s, l.b));
  if (l.relu) n.ops->relu_forward(y, y, size_t(rows) * l.conv.dims.c_out);
  nn::keep(*n.ops, l.out, y, items);
  return y;
}

// dy: gradient at the layer's output, overwritten by the ReLU's mask (a ReLU layer's only); dx
// (nullable) overwritten unless accumulate.
void backward(const MaskRcnn& n, const ConvBiasRelu& l, ParamStore& s, Arena& a, int items, float* dy, float* dx,
              bool accumulate, const std::function<void(size_t)>& ready) {
  ArenaScope scope(a);
  const int rows = items * l.rows_per_item;
  if (l.relu) nn::relu_backward_saved(*n.ops, l.out, items, dy);
  bias_backward(n, dy, rows, l.conv.dims.c_out, grad_ptr(s, l.b));
  ready(l.b);
  if (l.x16)
    nn::backward_image_bf16(*n.ops, l.conv, l.x16, s, a, items, dy, dx, accumulate);
  else
    nn::backward(*n.ops, l.conv, s, a, items, dy, dx, accumulate);
  ready(l.conv.w);
}

// Arena floats of a layer's backward (the convolution's scratch, with its input where it is widened)
// or forward (and its output) at `items`.
template <class Layer>
size_t backward_scratch_floats(const MaskRcnn& n, const Layer& l, int items) {
  const ConvDims d = with_n(l.conv_dims(), items);
  return l.x16 ? conv2d_scratch_floats_bf16_input(n.ops->device, d, Layer::kept_input)
               : n.ops->conv2d_scratch_floats(d);
}
template <class Layer>
size_t forward_scratch_floats(const MaskRcnn& n, const Layer& l, int items) {
  return backward_scratch_floats(n, l, items) + nn::scratch_floats(l.out, items);
}

// Returns the output in fp32, as forward() of a ConvBiasRelu.
const float* deconv_forward(const MaskRcnn& n, const Deconv2x& l, ParamStore& s, Arena& a, int items) {
  const ConvDims d = with_n(l.dims, items);
  float* y = nn::write_target(l.out, a, items);
  if (l.x16)
    conv2d_backward_data_bf16_input(n.ops->device, d, l.x16, param_ptr(s, l.w), y, a, false);
  else
    n.ops->conv2d_backward_data(d, l.x, param_ptr(s, l.w), y, a, false);
  const int rows = items * d.h * d.w;
  add_bias(n, y, rows, d.c_in, param_ptr(s, l.b));
  n.ops->relu_forward(y, y, size_t(rows) * d.c_in);
  nn::keep(*n.ops, l.out, y, items);
  return y;
}

// dy: gradient at the output, overwritten by the ReLU's mask.
void deconv_backward(const MaskRcnn& n, const Deconv2x& l, ParamStore& s, Arena& a, int items, float* dy, float* dx,
                     const std::function<void(size_t)>& ready) {
  ArenaScope scope(a);
  const ConvDims d = with_n(l.dims, items);
  const int rows = items * d.h * d.w;
  nn::relu_backward_saved(*n.ops, l.out, items, dy);
  bias_backward(n, dy, rows, d.c_in, grad_ptr(s, l.b));
  ready(l.b);
  // y = conv^T(x, W): dW = correlation of dy (the conv's input) with x (the conv's output gradient).
  if (l.x16)
    conv2d_backward_weights_bf16_input(n.ops->device, d, dy, l.x16, grad_ptr(s, l.w), a);
  else
    n.ops->conv2d_backward_weights(d, dy, l.x, grad_ptr(s, l.w), a);
  ready(l.w);
  n.ops->conv2d_forward(d, dy, param_ptr(s, l.w), dx, a);
}

double linear_flops(const nn::Linear& l) { return 2.0 * l.in * l.out; }

// The FPN over the stage outputs (stage_block: the block giving each), and its levels P2..P5 (+ P6).
void build_fpn(MaskRcnn& n, ParamStore& s, const std::vector<int>& stage_block) {
  const MaskRcnnSpec& spec = n.spec;
  Fpn& f = n.fpn;
  const int L = int(stage_block.size()), C = spec.fpn_channels, mb = spec.max_batch;
  f.stage_block = stage_block;
  f.lateral.resize(size_t(L));
  f.output.resize(size_t(L));
  f.up.assign(size_t(L), nullptr);
  f.dinner.resize(size_t(L));
  f.dstage.resize(size_t(L));
  // Coarsest first: the backward goes from the finest level up, so the views finish in reverse
  // registration order.
  for (int l = L - 1; l >= 0; --l) {
    const nn::ResidualBlock& blk = n.body.blocks[size_t(stage_block[size_t(l)])];
    const int h = blk.out_h, w = blk.out_w;
    MLPD_CHECK(spec.in_h % h == 0 && spec.in_w % w == 0 && spec.in_h / h == spec.in_w / w,
               "maskrcnn: the FPN needs input sides a multiple of the coarsest stride");
    const std::string name = "fpn.level" + std::to_string(l);
    // fp32: the top-down add, RoIAlign and the P6 pool read these maps.
    f.lateral[size_t(l)] =
        make_conv_bias_relu(n, s, name + ".lateral", blk.out, nullptr, h, w, blk.c_out, C, 1, mb, false, false);
    f.output[size_t(l)] = make_conv_bias_relu(n, s, name + ".output", f.lateral[size_t(l)].y(), nullptr, h, w, C, C,
                                              3, mb, false, false);
    if (l < L - 1) {
      const nn::ResidualBlock& above = n.body.blocks[size_t(stage_block[size_t(l + 1)])];
      MLPD_CHECK(2 * above.out_h == h && 2 * above.out_w == w,
                 "maskrcnn: FPN levels must halve exactly (input sides a multiple of the coarsest stride)");
      f.up[size_t(l)] = n.buffers.floats(size_t(mb) * h * w * C);
    }
    f.dinner[size_t(l)] = n.buffers.floats(size_t(mb) * h * w * C);
    f.dstage[size_t(l)] = n.buffers.floats(size_t(mb) * blk.out_per_image);
    n.backbone_flops += nn::conv_flops_per_image(f.lateral[size_t(l)].conv) +
                        nn::conv_flops_per_image(f.output[size_t(l)].conv);
  }
  for (int l = 0; l < L; ++l) {
    FeatureLevel lv;
    lv.feat = f.output[size_t(l)].y();
    lv.h = f.output[size_t(l)].conv.dims.h;
    lv.w = f.output[size_t(l)].conv.dims.w;
    lv.stride = spec.in_h / lv.h;
    n.levels.push_back(lv);
  }
  if (spec.fpn_top_pool) {
    const FeatureLevel& top = n.levels.back();
    f.top_pool = PoolDims{mb, top.h, top.w, C, 1, 2, 0};
    f.dtop_tmp = n.buffers.floats(size_t(mb) * top.h * top.w * C);
    FeatureLevel lv;
    lv.h = f.top_pool.out_h();
    lv.w = f.top_pool.out_w();
    lv.stride = 2 * top.stride;
    f.top = n.buffers.floats(size_t(mb) * lv.h * lv.w * C);
    lv.feat = f.top;
    n.levels.push_back(lv);
  }
}

// The FPN's pooled levels as the RoIAlign ops take them.
RoiLevels roi_levels(const MaskRcnn& n) {
  RoiLevels L;
  L.levels = n.pooled_levels;
  for (int l = 0; l < n.pooled_levels; ++l) {
    const FeatureLevel& lv = n.levels[size_t(l)];
    L.x[l] = lv.feat;
    L.dx[l] = lv.dfeat;
    L.h[l] = lv.h;
    L.w[l] = lv.w;
    L.spatial_scale[l] = 1.0f / float(lv.stride);
  }
  L.canonical_size = n.spec.fpn_canonical_size;
  L.finest = 0;
  while ((1 << L.finest) < n.levels[0].stride) ++L.finest;  // 2 for P2
  return L;
}

void make_head_pooling(MaskRcnn& n, HeadPooling& hp, int pool, int max_rois) {
  hp.pool = pool;
  hp.max_rois = max_rois;
  hp.pooled = nn::make_saved_activation(n.buffers, size_t(pool) * pool * n.fc, max_rois, n.keeps_bf16());
  hp.rois = n.buffers.floats(size_t(max_rois) * 5);
}

}  // namespace

std::unique_ptr<MaskRcnn> build_maskrcnn(const MaskRcnnSpec& spec, ParamStore& s) {
  MLPD_CHECK(!spec.stages.empty() && spec.max_batch > 0 && spec.classes > 1 && spec.max_rois > 0 &&
                 spec.max_masks > 0,
             "maskrcnn: bad spec");
  auto net = std::make_unique<MaskRcnn>();
  MaskRcnn& n = *net;
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
  std::vector<int> stage_block;
  for (size_t st = 0; st < spec.stages.size(); ++st) {
    for (int b = 0; b < spec.stages[st].blocks; ++b) {
      const std::string name = "layer" + std::to_string(st + 1) + "." + std::to_string(b);
      const int stride = b == 0 ? spec.stages[st].stride : 1;
      // The FPN's laterals read each stage's last output; without it the RPN reads the last one.
      const bool stage_end = b + 1 == spec.stages[st].blocks;
      const nn::BlockOutput out = nn::block_output(stage_end && (spec.fpn || st + 1 == spec.stages.size()));
      if (spec.bottleneck)
        nn::add_bottleneck_block(n.body, s, n.buffers, cb, name, spec.stages[st].channels, stride, out);
      else
        nn::add_basic_block(n.body, s, n.buffers, cb, name, spec.stages[st].channels, stride, out);
    }
    stage_block.push_back(int(n.body.blocks.size()) - 1);
  }
  n.backbone_flops = n.body.flops;
  if (spec.fpn) {
    n.fc = spec.fpn_channels;
    n.pooled_levels = int(spec.stages.size());
    build_fpn(n, s, stage_block);
    MLPD_CHECK(spec.anchors.sizes.size() == n.levels.size(), "maskrcnn: the FPN needs one anchor size per RPN level");
  } else {
    FeatureLevel lv;
    lv.feat = n.body.out;
    lv.h = n.body.out_h;
    lv.w = n.body.out_w;
    lv.stride = spec.anchors.stride;
    MLPD_CHECK(lv.stride * lv.h == spec.in_h || lv.stride * (lv.h - 1) < spec.in_h,
               "maskrcnn: anchor stride does not match the feature map");
    n.fc = n.body.out_c;
    n.levels.push_back(lv);
  }
  n.fh = n.levels[0].h;
  n.fw = n.levels[0].w;
  for (size_t l = 0; l < n.levels.size(); ++l) {
    FeatureLevel& lv = n.levels[l];
    AnchorSpec as = spec.anchors;
    as.stride = lv.stride;
    if (spec.fpn) as.sizes = {spec.anchors.sizes[l]};
    n.A = as.per_cell();
    const std::vector<float> a = make_anchors(as, lv.h, lv.w);
    lv.anchor_begin = n.total_anchors;
    n.total_anchors += a.size() / 4;
    n.anchors.insert(n.anchors.end(), a.begin(), a.end());
    lv.dfeat = n.buffers.floats(mb * size_t(lv.cells()) * n.fc);
  }

  // Rows of the bias GEMMs: the largest of the finest level's cells, mask-head pixels.
  const int M = 2 * spec.mask_pool;
  const size_t cells = size_t(n.levels[0].cells());
  n.ones_count = std::max({mb * cells, size_t(spec.max_masks) * M * M, size_t(spec.max_masks) * spec.mask_pool *
                                                                              spec.mask_pool});

  // RPN head, one set of views for every level.
  const bool several = n.levels.size() > 1;
  for (size_t l = 0; l < n.levels.size(); ++l) {
    FeatureLevel& lv = n.levels[l];
    if (l == 0) {
      lv.rpn_conv = make_conv_bias_relu(n, s, "rpn.conv", lv.feat, nullptr, lv.h, lv.w, n.fc, n.fc, 3, spec.max_batch,
                                        true, n.keeps_bf16());
      lv.rpn_obj = nn::make_linear(s, "rpn.objectness", n.fc, n.A);
      lv.rpn_delta = nn::make_linear(s, "rpn.deltas", n.fc, 4 * n.A);
    } else {
      lv.rpn_conv = share_conv_bias_relu(n, n.levels[0].rpn_conv, lv.feat, lv.h, lv.w, spec.max_batch);
      lv.rpn_obj = n.levels[0].rpn_obj;
      lv.rpn_delta = n.levels[0].rpn_delta;
    }
    const size_t lc = size_t(lv.cells());
    lv.rpn_obj.y = n.buffers.floats(mb * lc * n.A);
    lv.rpn_delta.y = n.buffers.floats(mb * lc * n.A * 4);
    lv.drpn_hidden = n.buffers.floats(mb * lc * n.fc);
    if (several) {
      lv.dobj = n.buffers.floats(mb * lc * n.A);
      lv.ddelta = n.buffers.floats(mb * lc * n.A * 4);
    }
    n.backbone_flops += nn::conv_flops_per_image(lv.rpn_conv.conv) +
                        double(lc) * (linear_flops(lv.rpn_obj) + linear_flops(lv.rpn_delta));
  }
  if (several) {
    n.rpn_obj_all = n.buffers.floats(mb * n.total_anchors);
    n.rpn_delta_all = n.buffers.floats(mb * n.total_anchors * 4);
  }

  // RoIAlign's outputs: the heads' inputs.
  make_head_pooling(n, n.box_pool, spec.box_pool, spec.max_rois);
  make_head_pooling(n, n.mask_pool, spec.mask_pool, spec.max_masks);

  // Box head.
  const size_t R = size_t(spec.max_rois);
  const int pooled = spec.box_pool * spec.box_pool * n.fc;
  n.fc6 = nn::make_linear(s, "box.fc6", pooled, spec.box_fc);
  n.fc7 = nn::make_linear(s, "box.fc7", spec.box_fc, spec.box_fc);
  n.cls = nn::make_linear(s, "box.cls", spec.box_fc, spec.classes);
  n.bbox = nn::make_linear(s, "box.deltas", spec.box_fc, 4 * spec.classes);
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
  const float* x = n.mask_pool.pooled.f32;
  const uint16_t* x16 = n.mask_pool.pooled.b16;
  int c = n.fc;
  // The gradients' turns (mask_grad_per_item): the deconv's output, each conv's from the last, the
  // pooled input.
  n.mask_grad_per_item[0] = size_t(M) * M * spec.mask_channels;
  for (int i = 0; i < spec.mask_convs; ++i) {
    n.mask_convs.push_back(make_conv_bias_relu(n, s, "mask.conv" + std::to_string(i + 1), x, x16, mp, mp, c,
                                               spec.mask_channels, 3, spec.max_masks, true, n.keeps_bf16()));
    x = n.mask_convs.back().out.f32;
    x16 = n.mask_convs.back().out.b16;
    c = spec.mask_channels;
    n.mask_flops += nn::conv_flops_per_image(n.mask_convs.back().conv);
    size_t& turn = n.mask_grad_per_item[(spec.mask_convs - i) % 2];
    turn = std::max(turn, size_t(mp) * mp * spec.mask_channels);
  }
  size_t& pooled_turn = n.mask_grad_per_item[(spec.mask_convs + 1) % 2];
  pooled_turn = std::max(pooled_turn, size_t(mp) * mp * n.fc);
  Deconv2x& dc = n.deconv;
  dc.dims = ConvDims{spec.max_masks, M, M, spec.mask_channels, c, 2, 2, 0};
  dc.w = add_param(s, "mask.deconv.weight", size_t(4) * spec.mask_channels * c, ParamKind::weight);
  dc.b = add_param(s, "mask.deconv.bias", size_t(spec.mask_channels), ParamKind::bias);
  dc.x = x;
  dc.x16 = x16;
  dc.out = nn::make_saved_activation(n.buffers, size_t(M) * M * spec.mask_channels, spec.max_masks, n.keeps_bf16());
  n.mask_flops += 2.0 * M * M * c * spec.mask_channels;
  n.mask_pred = nn::make_linear(s, "mask.predictor", spec.mask_channels, spec.classes);
  n.mask_pred.y = n.buffers.floats(MM * M * M * spec.classes);
  n.mask_flops += double(M) * M * linear_flops(n.mask_pred);

  n.ones = n.buffers.floats(n.ones_count);
  const std::vector<float> ones(n.ones_count, 1.0f);
  copy_to_device(spec.device, n.ones, ones.data(), sizeof(float) * ones.size());
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
  const FeatureLevel& l0 = n.levels[0];
  normal(l0.rpn_conv.conv.w, 0.01);
  zero(l0.rpn_conv.b);
  for (const nn::Linear* l : {&l0.rpn_obj, &l0.rpn_delta, static_cast<const nn::Linear*>(&n.cls)}) {
    normal(l->w, 0.01);
    zero(l->b);
  }
  normal(n.bbox.w, 0.001);
  zero(n.bbox.b);
  // Kaiming-uniform, a = 1: bound sqrt(3 / fan_in).
  auto kaiming_uniform = [&](size_t view, double fan_in) {
    const double bound = std::sqrt(3.0 / fan_in);
    Rng r{seed, view};
    float* p = param_ptr(s, view);
    for (size_t i = 0; i < s.views[view].count; ++i) p[i] = float(bound * (2.0 * r.uniform() - 1.0));
  };
  for (const nn::Linear* l : {&n.fc6, &n.fc7}) {
    kaiming_uniform(l->w, l->in);
    zero(l->b);
  }
  // The FPN's convolutions as maskrcnn-benchmark's conv_with_kaiming_uniform.
  for (const std::vector<ConvBiasRelu>* convs : {&n.fpn.lateral, &n.fpn.output})
    for (const ConvBiasRelu& l : *convs) {
      kaiming_uniform(l.conv.w, double(l.conv.dims.k) * l.conv.dims.k * l.conv.dims.c_in);
      zero(l.b);
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
  const int mb = n.spec.max_batch, mr = n.spec.max_rois, mm = n.spec.max_masks;
  size_t f = nn::scratch_floats(*n.ops, n.body, mb);
  for (const std::vector<ConvBiasRelu>* convs : {&n.fpn.lateral, &n.fpn.output})
    for (const ConvBiasRelu& l : *convs) f = std::max(f, forward_scratch_floats(n, l, mb));
  // The RPN's backward: its hidden layer (read for the predictors) and one predictor's input gradient.
  for (const FeatureLevel& lv : n.levels)
    f = std::max({f, forward_scratch_floats(n, lv.rpn_conv, mb),
                  nn::scratch_floats(lv.rpn_conv.out, mb) + nn::arena_span(size_t(mb) * lv.cells() * n.fc)});
  // The box head's backward: the gradient at its pooled input, under fc6's backward.
  const nn::SavedActivation& box = n.box_pool.pooled;
  f = std::max(f, nn::arena_span(size_t(mr) * box.per_item));
  // The mask head: each layer's forward, the first one's under the pooled RoIs it reads (in the
  // arena under bf16 storage); in backward, each layer's under the gradients' two buffers (the
  // predictor reads the deconv's kept output as it is, and takes no arena).
  const size_t mask_pooled = nn::scratch_floats(n.mask_pool.pooled, mm);
  size_t mask_fwd = std::max(forward_scratch_floats(n, n.deconv, mm), mask_pooled);
  size_t mask_bwd = backward_scratch_floats(n, n.deconv, mm);
  for (size_t i = 0; i < n.mask_convs.size(); ++i) {
    const ConvBiasRelu& l = n.mask_convs[i];
    mask_fwd = std::max(mask_fwd, (i == 0 ? mask_pooled : 0) + forward_scratch_floats(n, l, mm));
    mask_bwd = std::max(mask_bwd, backward_scratch_floats(n, l, mm));
  }
  const size_t turns =
      nn::arena_span(size_t(mm) * n.mask_grad_per_item[0]) + nn::arena_span(size_t(mm) * n.mask_grad_per_item[1]);
  f = std::max({f, mask_fwd, turns + mask_bwd});
  return f * sizeof(float) + 4096;
}

const MaskRcnnSpec& maskrcnn_spec_of(const MaskRcnn& n) { return n.spec; }
int maskrcnn_feature_h(const MaskRcnn& n) { return n.fh; }
int maskrcnn_feature_w(const MaskRcnn& n) { return n.fw; }
const std::vector<float>& maskrcnn_anchors(const MaskRcnn& n) { return n.anchors; }
int maskrcnn_mask_size(const MaskRcnn& n) { return 2 * n.spec.mask_pool; }
int maskrcnn_rpn_levels(const MaskRcnn& n) { return int(n.levels.size()); }
std::vector<int> maskrcnn_level_first_anchor(const MaskRcnn& n) {
  std::vector<int> first;
  for (const FeatureLevel& lv : n.levels) first.push_back(int(lv.anchor_begin));
  first.push_back(int(n.total_anchors));
  return first;
}

int maskrcnn_roi_level(const MaskRcnn& n, const float* roi) {
  if (n.pooled_levels == 1) return 0;
  const RoiLevels L = roi_levels(n);
  return fpn_roi_level(roi, L.canonical_size, L.finest, L.levels);
}

namespace {

// Top-down: each level's inner map is its lateral plus the level above's, upsampled; then the
// output convolution; P6 from P5.
void fpn_forward(MaskRcnn& n, ParamStore& s, Arena& a, int batch) {
  const OpTable& o = *n.ops;
  Fpn& f = n.fpn;
  const int L = int(f.lateral.size()), C = n.spec.fpn_channels;
  for (int l = L - 1; l >= 0; --l) {
    const ConvBiasRelu& lat = f.lateral[size_t(l)];
    forward(n, lat, s, a, batch);
    if (l < L - 1) {
      const FeatureLevel& above = n.levels[size_t(l + 1)];
      o.upsample_nearest2x_forward(f.lateral[size_t(l + 1)].y(), batch, above.h, above.w, C, f.up[size_t(l)]);
      o.add_forward(lat.y(), f.up[size_t(l)], lat.y(), size_t(batch) * lat.rows_per_item * C);
    }
    forward(n, f.output[size_t(l)], s, a, batch);
  }
  if (n.spec.fpn_top_pool) {
    PoolDims d = f.top_pool;
    d.n = batch;
    o.maxpool_forward(d, f.output[size_t(L - 1)].y(), f.top);
  }
}

// Mirror of fpn_forward from the levels' gradients (dfeat) to the stage outputs' (fpn.dstage).
void fpn_backward(MaskRcnn& n, ParamStore& s, Arena& a, int batch, const std::function<void(size_t)>& ready) {
  const OpTable& o = *n.ops;
  Fpn& f = n.fpn;
  const int L = int(f.lateral.size()), C = n.spec.fpn_channels;
  if (n.spec.fpn_top_pool) {
    PoolDims d = f.top_pool;
    d.n = batch;
    FeatureLevel& top = n.levels[size_t(L - 1)];
    o.maxpool_backward(d, top.feat, n.levels[size_t(L)].dfeat, f.dtop_tmp);
    o.add_forward(top.dfeat, f.dtop_tmp, top.dfeat, size_t(batch) * top.cells() * C);
  }
  for (int l = 0; l < L; ++l) {
    const FeatureLevel& lv = n.levels[size_t(l)];
    backward(n, f.output[size_t(l)], s, a, batch, lv.dfeat, f.dinner[size_t(l)], false, ready);
    if (l > 0) o.upsample_nearest2x_backward(f.dinner[size_t(l - 1)], batch, lv.h, lv.w, C, f.dinner[size_t(l)]);
    backward(n, f.lateral[size_t(l)], s, a, batch, f.dinner[size_t(l)], f.dstage[size_t(l)], false, ready);
  }
}

}  // namespace

RpnOutputs maskrcnn_rpn_forward(MaskRcnn& n, ParamStore& s, Arena& a, const float* x, int batch, bool train) {
  MLPD_CHECK(batch > 0 && batch <= n.spec.max_batch, "maskrcnn_rpn_forward: batch outside [1, max_batch]");
  const OpTable& o = *n.ops;
  copy_to_device(n.spec.device, n.input, x, sizeof(float) * n.input_per_image * size_t(batch));
  nn::forward(o, n.body, s, a, batch, train);
  if (n.spec.fpn) fpn_forward(n, s, a, batch);
  for (const FeatureLevel& lv : n.levels) {
    ArenaScope scope(a);
    nn::Linear obj = lv.rpn_obj, delta = lv.rpn_delta;
    obj.x = delta.x = forward(n, lv.rpn_conv, s, a, batch);
    const int rows = batch * lv.cells();
    nn::forward(o, obj, s, rows);
    nn::forward(o, delta, s, rows);
  }
  n.batch = batch;
  n.last_n = train ? batch : 0;
  n.last_rois = n.last_masks = 0;
  if (n.levels.size() == 1) return {n.levels[0].rpn_obj.y, n.levels[0].rpn_delta.y};
  // Each image's anchors level by level.
  const int total = int(n.total_anchors);
  for (const FeatureLevel& lv : n.levels) {
    const int width = lv.cells() * n.A;
    o.copy_rows(lv.rpn_obj.y, width, batch, width, n.rpn_obj_all + lv.anchor_begin, total);
    o.copy_rows(lv.rpn_delta.y, 4 * width, batch, 4 * width, n.rpn_delta_all + 4 * lv.anchor_begin, 4 * total);
  }
  return {n.rpn_obj_all, n.rpn_delta_all};
}

namespace {

// RoIAlign of a head's RoIs ([count, 5], host or, with rois_on_device, the model's memory) into
// pooled [count, pool, pool, fc]: from the one level, or each from the level its size picks (the
// choice made by the op, so no RoI comes back to the host).
void pool_rois_into(MaskRcnn& n, HeadPooling& hp, const float* rois, int count, bool rois_on_device, float* pooled) {
  const OpTable& o = *n.ops;
  const Device dev = n.spec.device;
  const size_t bytes = sizeof(float) * size_t(count) * 5;
  if (rois_on_device) {
    copy_within(dev, hp.rois, rois, bytes);
  } else {
    for (int i = 0; i < count; ++i)
      MLPD_CHECK(rois[size_t(i) * 5] >= 0 && rois[size_t(i) * 5] < float(n.batch),
                 "maskrcnn: RoI batch index out of range");
    copy_to_device(dev, hp.rois, rois, bytes);
  }
  const int p = hp.pool;
  if (n.pooled_levels == 1) {
    const FeatureLevel& lv = n.levels[0];
    o.roi_align_forward(lv.feat, n.batch, lv.h, lv.w, n.fc, hp.rois, count, p, p, 1.0f / float(lv.stride),
                        n.spec.sampling_ratio, false, pooled);
    return;
  }
  o.roi_align_levels_forward(roi_levels(n), n.batch, n.fc, hp.rois, count, p, n.spec.sampling_ratio, pooled);
}

// The head's RoIs pooled into hp.pooled; returns them in fp32 (under bf16 storage Arena scratch,
// the caller's until its ArenaScope ends).
const float* pool_rois(MaskRcnn& n, HeadPooling& hp, Arena& a, const float* rois, int count, bool rois_on_device) {
  float* pooled = nn::write_target(hp.pooled, a, count);
  pool_rois_into(n, hp, rois, count, rois_on_device, pooled);
  nn::keep(*n.ops, hp.pooled, pooled, count);
  return pooled;
}

// Adds the pooled rows' gradient (dpooled [count, pool, pool, fc]) into the levels' dfeat.
void pool_rois_backward(MaskRcnn& n, const HeadPooling& hp, int count, const float* dpooled) {
  const OpTable& o = *n.ops;
  const int p = hp.pool;
  if (n.pooled_levels == 1) {
    const FeatureLevel& lv = n.levels[0];
    o.roi_align_backward(dpooled, n.batch, lv.h, lv.w, n.fc, hp.rois, count, p, p, 1.0f / float(lv.stride),
                         n.spec.sampling_ratio, false, lv.dfeat);
    return;
  }
  o.roi_align_levels_backward(roi_levels(n), n.batch, n.fc, hp.rois, count, p, n.spec.sampling_ratio, dpooled);
}

}  // namespace

BoxHeadOutputs maskrcnn_box_forward(MaskRcnn& n, ParamStore& s, Arena& a, const float* rois, int count,
                                    bool rois_on_device) {
  MLPD_CHECK(count > 0 && count <= n.spec.max_rois, "maskrcnn_box_forward: RoIs outside [1, max_rois]");
  MLPD_CHECK(n.batch > 0, "maskrcnn_box_forward: needs a backbone forward first");
  const OpTable& o = *n.ops;
  {
    ArenaScope scope(a);
    nn::Linear fc6 = n.fc6;
    fc6.x = pool_rois(n, n.box_pool, a, rois, count, rois_on_device);
    nn::forward(o, fc6, s, count);
  }
  o.relu_forward(n.fc6.y, n.fc6.y, size_t(count) * n.fc6.out);
  nn::forward(o, n.fc7, s, count);
  o.relu_forward(n.fc7.y, n.fc7.y, size_t(count) * n.fc7.out);
  nn::forward(o, n.cls, s, count);
  nn::forward(o, n.bbox, s, count);
  n.last_rois = count;
  return {n.cls.y, n.bbox.y};
}

const float* maskrcnn_mask_forward(MaskRcnn& n, ParamStore& s, Arena& a, const float* rois, int count,
                                   bool rois_on_device) {
  MLPD_CHECK(count > 0 && count <= n.spec.max_masks, "maskrcnn_mask_forward: RoIs outside [1, max_masks]");
  MLPD_CHECK(n.batch > 0, "maskrcnn_mask_forward: needs a backbone forward first");
  const OpTable& o = *n.ops;
  const int M = 2 * n.spec.mask_pool;
  {
    ArenaScope scope(a);
    // The first conv reads the pooled RoIs as pooled (in the arena under bf16 storage), not their
    // bf16 copy: the arena bound counts them under its forward.
    const float* pooled = pool_rois(n, n.mask_pool, a, rois, count, rois_on_device);
    if (!n.mask_convs.empty()) forward(n, n.mask_convs[0], s, a, count, pooled);
  }
  for (size_t i = 1; i < n.mask_convs.size(); ++i) {
    ArenaScope scope(a);
    forward(n, n.mask_convs[i], s, a, count);
  }
  ArenaScope scope(a);
  nn::Linear pred = n.mask_pred;
  pred.x = deconv_forward(n, n.deconv, s, a, count);
  nn::forward(o, pred, s, count * M * M);
  n.last_masks = count;
  return n.mask_pred.y;
}

void maskrcnn_backward(MaskRcnn& n, ParamStore& s, Arena& a, const MaskRcnnGrads& g,
                       const std::function<void(size_t)>& ready) {
  MLPD_CHECK(n.last_n > 0, "maskrcnn_backward: needs a train-mode forward");
  const OpTable& o = *n.ops;
  const int batch = n.last_n;
  for (const FeatureLevel& lv : n.levels)
    zero_on(n.spec.device, lv.dfeat, sizeof(float) * size_t(batch) * lv.cells() * n.fc);
  // Mask head (registered last: its views finish first).
  const int masks = g.mask_logits ? n.last_masks : 0;
  if (masks > 0) {
    ArenaScope scope(a);
    float* turn[2] = {arena_floats(a, size_t(masks) * n.mask_grad_per_item[0]),
                      arena_floats(a, size_t(masks) * n.mask_grad_per_item[1])};
    nn::linear_backward_saved(o, n.mask_pred, n.deconv.out, s, masks, g.mask_logits, turn[0]);
    ready(n.mask_pred.b);
    ready(n.mask_pred.w);
    deconv_backward(n, n.deconv, s, a, masks, turn[0], turn[1], ready);
    int t = 1;  // the turn holding the gradient at the next layer's output
    for (size_t i = n.mask_convs.size(); i-- > 0; t ^= 1)
      backward(n, n.mask_convs[i], s, a, masks, turn[t], turn[t ^ 1], false, ready);
    pool_rois_backward(n, n.mask_pool, masks, turn[t]);
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
    ArenaScope scope(a);
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
    float* dpooled = arena_floats(a, size_t(rois) * n.box_pool.pooled.per_item);
    nn::linear_backward_saved(o, n.fc6, n.box_pool.pooled, s, rois, n.dfc6, dpooled);
    ready(n.fc6.b);
    ready(n.fc6.w);
    pool_rois_backward(n, n.box_pool, rois, dpooled);
  } else {
    for (const nn::Linear* l : {&n.bbox, &n.cls, &n.fc7, &n.fc6}) {
      ready(l->b);
      ready(l->w);
    }
  }
  // RPN head, the same views on every level: its hidden layer's gradient is the sum of both
  // predictors'; the views are ready after the last level.
  const bool several = n.levels.size() > 1;
  const int total = int(n.total_anchors);
  for (FeatureLevel& lv : n.levels) {
    const int rows = batch * lv.cells(), width = lv.cells() * n.A;
    const float* dobj = g.objectness;
    const float* ddelta = g.rpn_deltas;
    if (several) {
      o.copy_rows(g.objectness + lv.anchor_begin, total, batch, width, lv.dobj, width);
      o.copy_rows(g.rpn_deltas + 4 * lv.anchor_begin, 4 * total, batch, 4 * width, lv.ddelta, 4 * width);
      dobj = lv.dobj;
      ddelta = lv.ddelta;
    }
    ArenaScope scope(a);
    nn::Linear obj = lv.rpn_obj, delta = lv.rpn_delta;
    obj.x = delta.x = nn::read_saved(o, lv.rpn_conv.out, a, batch);
    float* dhidden_delta = arena_floats(a, size_t(rows) * n.fc);
    nn::backward(o, delta, s, rows, ddelta, dhidden_delta);
    nn::backward(o, obj, s, rows, dobj, lv.drpn_hidden);
    o.add_forward(lv.drpn_hidden, dhidden_delta, lv.drpn_hidden, size_t(rows) * n.fc);
  }
  const FeatureLevel& l0 = n.levels[0];
  for (size_t v : {l0.rpn_delta.b, l0.rpn_delta.w, l0.rpn_obj.b, l0.rpn_obj.w}) ready(v);
  const std::function<void(size_t)> not_yet = [](size_t) {};
  for (size_t l = 0; l < n.levels.size(); ++l) {
    const FeatureLevel& lv = n.levels[l];
    backward(n, lv.rpn_conv, s, a, batch, lv.drpn_hidden, lv.dfeat, true, l + 1 == n.levels.size() ? ready : not_yet);
  }
  if (!n.spec.fpn) {
    nn::backward(o, n.body, s, a, batch, l0.dfeat, ready);
  } else {
    fpn_backward(n, s, a, batch, ready);
    const Fpn& f = n.fpn;
    std::vector<const float*> block_dy(n.body.blocks.size(), nullptr);
    for (size_t l = 0; l + 1 < f.stage_block.size(); ++l) block_dy[size_t(f.stage_block[l])] = f.dstage[l];
    nn::backward(o, n.body, s, a, batch, f.dstage.back(), ready, block_dy);
  }
  n.last_n = 0;
}

std::string maskrcnn_summary(const MaskRcnn& n) {
  char buf[360];
  std::snprintf(buf, sizeof buf,
                "%s: %zu params, %.2f MFLOPs/image fwd (backbone%s + RPN), %.2f MFLOPs/RoI box head, %.2f MFLOPs/RoI "
                "mask head, input %dx%dx%d, %s %dx%dx%d%s, %d anchors, %d classes",
                n.spec.variant.c_str(), n.n_params, n.backbone_flops / 1e6, n.spec.fpn ? " + FPN" : "",
                n.box_flops / 1e6, n.mask_flops / 1e6, n.spec.in_h, n.spec.in_w, n.spec.in_c,
                n.spec.fpn ? "feature maps from" : "feature map", n.fh, n.fw, n.fc,
                n.spec.fpn ? (" (" + std::to_string(n.levels.size()) + " levels)").c_str() : "",
                int(n.anchors.size() / 4), n.spec.classes);
  return buf;
}

double maskrcnn_backbone_flops(const MaskRcnn& n) { return n.backbone_flops; }
double maskrcnn_box_flops_per_roi(const MaskRcnn& n) { return n.box_flops; }
double maskrcnn_mask_flops_per_roi(const MaskRcnn& n) { return n.mask_flops; }

size_t maskrcnn_activation_bytes(const MaskRcnn& net) { return net.buffers.bytes; }

}  // namespace mlpd

void std::default_delete<mlpd::MaskRcnn>::operator()(mlpd::MaskRcnn* p) const { delete p; }
