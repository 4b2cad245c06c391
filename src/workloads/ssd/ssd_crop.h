// MLPerf SSD's random crop (the reference's SSDCropping): per image, pick a mode uniformly from
// {keep the image, min IoU 0.1, 0.3, 0.5, 0.7, 0.9, any IoU}; try up to `max_samples` crops of
// 0.3-1.0 of each side with aspect 1/2-2 whose IoU with every box lies in the mode's range and that
// keeps the centre of at least one box; on success keep the boxes whose centres fall inside, clipped
// to the crop, and resize the crop back to the image size (bilinear); after max_samples failures pick
// a mode again. max_samples is the rules table's `max_samples` (1 or 50). Deterministic in (seed,
// epoch, image index).
#pragma once
#include <cstdint>
#include <vector>

#include "detection/detection_data.h"

namespace mlpd {

struct CropScratch {
  std::vector<float> image;  // one image's pixels while it is resized
  std::vector<float> boxes;
  std::vector<int32_t> labels, first;
  std::vector<int64_t> instance;
};

// b: a filled batch (normalized pixels, boxes x1,y1,x2,y2 in [0,1]); image_index[i] is the dataset
// index of b's image i (the random stream). Rewrites b's pixels and boxes in place.
void random_crop_batch(DetectionBatch& b, int h, int w, int c, int max_samples, uint64_t seed, int epoch,
                       const int64_t* image_index, CropScratch& scratch);

}  // namespace mlpd
