// The reference-scale detection data: COCO 2017 (annotations/instances_{train,val}2017.json and
// the JPEGs of train2017/, val2017/) into the detection HDF5 layout (detection_data.h), images
// decoded with libjpeg-turbo, made RGB, resized to a square (bilinear), boxes scaled and masks
// (polygons or RLE) rasterized at the original size and resized by nearest neighbour. Category ids
// become 1..K in ascending id order (the original ids are the root attribute coco_category_ids).
// Train images without annotations are left out, as MLPerf's SSD does; every val image is kept.
#pragma once
#include <cstdint>
#include <string>

namespace mlpd {

struct CocoConvertOptions {
  std::string coco_dir;
  int image_size = 300;
  int64_t max_images = 0;  // per split; 0: all (tests and quick trials use a few)
};

struct CocoConvertStats {
  int64_t train_images = 0, eval_images = 0, train_instances = 0, eval_instances = 0;
};

// Writes out_h5 atomically, streaming the images; a progress line every few thousand images.
// UserError (exit 2) naming the file on a missing or corrupt JSON or JPEG.
CocoConvertStats prepare_coco(const CocoConvertOptions& options, const std::string& out_h5,
                              const std::string& benchmark);

}  // namespace mlpd
