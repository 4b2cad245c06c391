// Image resizing shared by the detection data: the scene generator's items and COCO's images.
#pragma once
#include <cstdint>
#include <vector>

namespace mlpd {

// Bilinear resize of 8-bit pixels [sh, sw, c] to [h, w, c]: pixel centres aligned (source
// coordinate (x + 0.5) * sw / w - 0.5, clamped at the edges), no antialiasing, rounded to nearest.
std::vector<uint8_t> resize_bilinear_u8(const uint8_t* src, int sh, int sw, int c, int h, int w);

}  // namespace mlpd
