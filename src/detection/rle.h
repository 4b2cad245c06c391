// Instance masks as COCO's run-length encoding: the mask read in column-major (Fortran) order,
// counts of alternating runs starting with zeros (a mask starting with a 1 has a first count of 0).
// This is pycocotools' uncompressed RLE; the compressed string form ("counts" as a string in COCO
// JSON) converts both ways. Evaluation (mask IoU), the scene generator and the COCO converter all
// hold masks this way.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mlpd {

struct Rle {
  int h = 0, w = 0;
  std::vector<uint32_t> counts;  // sums to h*w
};

// From a dense mask [h, w] row-major (any non-zero is foreground).
Rle rle_encode(const uint8_t* mask, int h, int w);
// Into a dense mask [h, w] row-major, 0/1; `mask` holds h*w bytes.
void rle_decode(const Rle& rle, uint8_t* mask);
// Foreground pixels.
uint64_t rle_area(const Rle& rle);
// pycocotools' maskUtils.iou for one pair: |a ∩ b| / |a ∪ b|, or with crowd_b |a ∩ b| / |a|;
// 0 when the union is empty. Both of the same h, w.
double rle_iou(const Rle& a, const Rle& b, bool crowd_b);
// Tight box [x, y, w, h] in pixels as maskUtils.toBbox (0s for an empty mask).
void rle_to_bbox(const Rle& rle, double box[4]);
// pycocotools' frPyObjects for polygons: each polygon [x0, y0, x1, y1, ...] rasterized as its C
// rleFrPoly does (upsampled by 5, edges walked, rounded), the polygons of one object merged (union).
Rle rle_from_polygons(const std::vector<std::vector<double>>& polygons, int h, int w);
// COCO's compressed counts string (LEB128-like, 6 bits per char, offset 48; deltas from the
// count two back after the third), as rleToString / rleFrString.
std::string rle_to_string(const Rle& rle);
// Throws std::invalid_argument on a malformed string or counts that do not sum to h*w.
Rle rle_from_string(const std::string& s, int h, int w);

}  // namespace mlpd
