// The mini scale's detection data: "scenes", semi-synthetic 96x96 canvases composed of 1-4 real
// Fashion-MNIST items each (no real annotated detection set is packaged in Debian). Each item is
// scaled (bilinear, 0.6-1.8x) and placed at a random position with bounded overlap; later items
// are painted over earlier ones. Each item gives its class, an instance mask (its pixels above a
// threshold, minus the pixels of items painted after it) and the tight box of that mask. An item
// left with less than 20% of its own mask, or fewer than 30 pixels, is dropped as an instance (its
// pixels stay on the canvas, as background clutter). Train scenes use the IDX train items, eval
// scenes the t10k items. Everything is a function of the seed.
#pragma once
#include <cstdint>
#include <string>

namespace mlpd {

struct SceneOptions {
  std::string fashion_mnist_dir;
  uint64_t seed = 1;
  int64_t train_scenes = 20000, eval_scenes = 2000;
  int size = 96;
  int min_items = 1, max_items = 4;
  double min_scale = 0.6, max_scale = 1.8;
  double max_iou = 0.3;    // between an item's box and every earlier item's box
  int mask_threshold = 32;  // of 255: an item's pixel above it belongs to the item's mask
};

struct SceneStats {
  int64_t train_instances = 0, eval_instances = 0, dropped = 0;
};

// Writes out_h5 atomically (detection_data.h layout, benchmark name given for the file's attributes).
SceneStats prepare_scenes(const SceneOptions& options, const std::string& out_h5, const std::string& benchmark);

}  // namespace mlpd
