// SSD: a ResNet backbone, extra layers that halve the feature map, and on each feature map a 3x3
// class head and a 3x3 box head over its default boxes (priors). NHWC throughout, so a head's
// output [n, h, w, A*classes] is already [n, h*w*A, classes]: the maps are concatenated per image
// into conf [n, P, classes] and loc [n, P, 4] by row copies.
//   ssd_mini: 96x96x1 scenes; stem 3x3/2, two basic-block stages (stride 2) -> 12x12x64, two extras
//             -> 6x6, 3x3; 846 priors.
//   ssd300:   MLPerf's SSD300-ResNet34: ResNet-34 through layer3 (layer3 at stride 1) -> 38x38x256,
//             five extras -> 19, 10, 5, 3, 1; 8732 priors.
#pragma once
#include "core/precision.h"
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/param_store.h"
#include "core/tensor.h"

namespace mlpd {

struct SsdStageSpec {
  int channels = 0, blocks = 1, stride = 1;  // the first block carries the stride
};
struct SsdExtraSpec {
  int mid = 0, out = 0, stride = 2, pad = 1;  // 1x1 conv to mid, then 3x3 conv to out
};
// Default boxes of one feature map, as MLPerf's SSD: per cell (scale, scale), (s', s') with
// s' = sqrt(scale * next_scale), and for each aspect ratio r (scale*sqrt(r), scale/sqrt(r)) and its
// transpose; centres at cell centres; all clipped to [0, 1].
struct SsdMapSpec {
  double scale = 0.2, next_scale = 0.4;
  std::vector<double> aspect_ratios;  // besides 1
  int boxes_per_cell() const { return 2 + 2 * static_cast<int>(aspect_ratios.size()); }
};

struct SsdSpec {
  std::string variant = "ssd_mini";
  int in_h = 96, in_w = 96, in_c = 1;
  int classes = 11;  // background included (index 0)
  int stem_channels = 16, stem_kernel = 3, stem_stride = 2;
  bool stem_maxpool = false;
  std::vector<SsdStageSpec> stages;
  std::vector<SsdExtraSpec> extras;
  std::vector<SsdMapSpec> maps;  // extras.size() + 1: the last stage's output, then each extra's
  int max_batch = 32;
  float bn_momentum = 0.9f, bn_eps = 1e-5f;
  Device device = Device::cpu;
  Precision precision = Precision::fp32;  // --precision: the op table (core/precision.h)
};

// The named architectures ("ssd_mini", "ssd300") for an input and class count; UserError for
// an unknown name.
SsdSpec ssd_spec(const std::string& variant, int in_h, int in_w, int in_c, int classes, int max_batch);

struct Ssd;  // opaque

std::unique_ptr<Ssd> build_ssd(const SsdSpec& spec, ParamStore& store);
void init_ssd(Ssd& net, ParamStore& store, uint64_t seed);
size_t ssd_arena_bytes(const Ssd& net, int batch);
int ssd_num_priors(const Ssd& net);
// Host [P, 4] (cx, cy, w, h), normalized, in the order of the model's outputs.
const std::vector<float>& ssd_priors(const Ssd& net);

struct SsdOutputs {
  const float* conf = nullptr;  // [n, P, classes] logits, on the device
  const float* loc = nullptr;   // [n, P, 4] encoded offsets, on the device
};
// x: [n, in_h, in_w, in_c] in HOST memory (copied up). Valid until the next forward.
SsdOutputs ssd_forward(Ssd& net, ParamStore& store, Arena& arena, const float* x, int n, bool train);
// dconf, dloc (device) for the last train-mode forward of the same n: ADDS parameter gradients and
// calls ready(view) once per view, in reverse registration order.
void ssd_backward(Ssd& net, ParamStore& store, Arena& arena, const float* dconf, const float* dloc, int n,
                  const std::function<void(size_t)>& ready);
std::string ssd_summary(const Ssd& net);
// Bytes of the model's activation and gradient buffers on its device (DeviceBuffers).
size_t ssd_activation_bytes(const Ssd& net);
double ssd_flops_per_image(const Ssd& net);  // forward, 2 * multiply-adds

}  // namespace mlpd

template <>
struct std::default_delete<mlpd::Ssd> {
  void operator()(mlpd::Ssd* p) const;
};
