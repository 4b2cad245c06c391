#include "detection/scenes.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "datasets/fashion_mnist.h"
#include "detection/detection_data.h"
#include "detection/resize.h"

namespace mlpd {

namespace {

constexpr uint64_t kSceneStream = 0x5343'454E'4500'0000ull;  // "SCENE"

struct Placed {
  int x0, y0, w, h;  // the scaled item's frame on the canvas
  int label;         // 0..9
  std::vector<uint8_t> pixels;  // [h, w]
};

double box_iou(const Placed& a, const Placed& b) {
  const int iw = std::max(0, std::min(a.x0 + a.w, b.x0 + b.w) - std::max(a.x0, b.x0));
  const int ih = std::max(0, std::min(a.y0 + a.h, b.y0 + b.h) - std::max(a.y0, b.y0));
  const double inter = double(iw) * ih;
  return inter / (double(a.w) * a.h + double(b.w) * b.h - inter);
}

struct SceneRng {
  uint64_t seed, stream, counter = 0;
  double uniform() { return double(rng_u64(seed, stream, counter++) >> 11) * (1.0 / 9007199254740992.0); }
  uint64_t below(uint64_t n) { return rng_below(seed, stream, counter++, n); }
};

// Composes scene `index` of a split into `out` (appending its image and instances).
void compose_scene(const SceneOptions& o, const FashionMnistItems& items, uint64_t split_stream, int64_t index,
                   DetectionSplitData& out, SceneStats& stats) {
  SceneRng r{o.seed, split_stream ^ mix64(uint64_t(index)), 0};
  const int S = o.size;
  const int want = o.min_items + int(r.below(uint64_t(o.max_items - o.min_items + 1)));
  std::vector<Placed> placed;
  for (int k = 0; k < want; ++k) {
    for (int attempt = 0; attempt < 20; ++attempt) {
      const int64_t item = int64_t(r.below(uint64_t(items.n)));
      const double sc = o.min_scale + (o.max_scale - o.min_scale) * r.uniform();
      Placed p;
      p.h = std::max(4, int(std::lround(items.rows * sc)));
      p.w = std::max(4, int(std::lround(items.cols * sc)));
      p.x0 = int(r.below(uint64_t(S - p.w + 1)));
      p.y0 = int(r.below(uint64_t(S - p.h + 1)));
      bool ok = true;
      for (const Placed& q : placed) ok = ok && box_iou(p, q) <= o.max_iou;
      if (!ok) continue;
      p.label = items.labels[size_t(item)];
      p.pixels = resize_bilinear_u8(items.images.data() + size_t(item) * items.rows * items.cols, items.rows, items.cols, 1,
                             p.h, p.w);
      placed.push_back(std::move(p));
      break;
    }
  }
  // Paint in order; owner[pixel] = the last item whose mask covers it (-1: none).
  std::vector<uint8_t> canvas(size_t(S) * S, 0);
  std::vector<int> owner(size_t(S) * S, -1);
  std::vector<int64_t> full(placed.size(), 0);
  for (size_t k = 0; k < placed.size(); ++k) {
    const Placed& p = placed[k];
    for (int y = 0; y < p.h; ++y)
      for (int x = 0; x < p.w; ++x) {
        const uint8_t v = p.pixels[size_t(y) * p.w + x];
        if (v <= o.mask_threshold) continue;
        const size_t at = size_t(p.y0 + y) * S + (p.x0 + x);
        canvas[at] = v;
        owner[at] = int(k);
        ++full[k];
      }
  }
  out.images.insert(out.images.end(), canvas.begin(), canvas.end());
  out.image_ids.push_back(index + 1);
  std::vector<uint8_t> mask(size_t(S) * S);
  for (size_t k = 0; k < placed.size(); ++k) {
    int64_t visible = 0;
    for (size_t at = 0; at < mask.size(); ++at) {
      mask[at] = owner[at] == int(k) ? 1 : 0;
      visible += mask[at];
    }
    if (visible < 30 || visible * 5 < full[k]) {
      ++stats.dropped;
      continue;
    }
    Rle rle = rle_encode(mask.data(), S, S);
    double box[4];
    rle_to_bbox(rle, box);
    out.boxes.insert(out.boxes.end(), {float(box[0]), float(box[1]), float(box[2]), float(box[3])});
    out.classes.push_back(placed[k].label + 1);
    out.iscrowd.push_back(0);
    out.area.push_back(float(visible));
    out.masks.push_back(std::move(rle));
  }
  out.inst_first.push_back(int64_t(out.classes.size()));
}

DetectionSplitData compose_split(const SceneOptions& o, const FashionMnistItems& items, uint64_t stream,
                                 int64_t count, SceneStats& stats) {
  DetectionSplitData d;
  d.count = count;
  d.h = d.w = o.size;
  d.c = 1;
  d.images.reserve(size_t(count) * o.size * o.size);
  d.inst_first.push_back(0);
  for (int64_t i = 0; i < count; ++i) compose_scene(o, items, stream, i, d, stats);
  return d;
}

}  // namespace

SceneStats prepare_scenes(const SceneOptions& o, const std::string& out_h5, const std::string& benchmark) {
  if (o.train_scenes < 1 || o.eval_scenes < 1 || o.size < 32 || o.min_items < 1 || o.max_items < o.min_items ||
      !(o.min_scale > 0 && o.max_scale >= o.min_scale))
    throw UserError("scenes: bad options", 2);
  const FashionMnistItems train_items = read_fashion_mnist(o.fashion_mnist_dir, "train");
  const FashionMnistItems eval_items = read_fashion_mnist(o.fashion_mnist_dir, "t10k");
  if (train_items.rows * o.max_scale > o.size || train_items.cols * o.max_scale > o.size)
    throw UserError("scenes: items scaled by " + std::to_string(o.max_scale) + " do not fit a " +
                        std::to_string(o.size) + "-pixel canvas",
                    2);
  SceneStats stats;
  const DetectionSplitData train = compose_split(o, train_items, kSceneStream ^ 1, o.train_scenes, stats);
  const DetectionSplitData eval = compose_split(o, eval_items, kSceneStream ^ 2, o.eval_scenes, stats);
  stats.train_instances = int64_t(train.classes.size());
  stats.eval_instances = int64_t(eval.classes.size());
  DetectionFileInfo info;
  info.benchmark = benchmark;
  info.scale = "mini";
  info.class_names = fashion_mnist_class_names();
  info.source = "scenes (semi-synthetic): " + std::to_string(o.size) + "x" + std::to_string(o.size) +
                " canvases of 1-4 Fashion-MNIST items (Zalando Research) from the Debian package "
                "dataset-fashion-mnist, read from " +
                o.fashion_mnist_dir + "; seed " + std::to_string(o.seed) + "; /eval from the t10k items";
  info.licence = "MIT (Expat), Copyright 2017 Zalando SE";
  info.created_by = "mlperf-dist prepare --benchmark " + benchmark + " --scale mini";
  write_detection_file(out_h5, info, train, eval);
  return stats;
}

}  // namespace mlpd
