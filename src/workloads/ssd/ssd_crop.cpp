#include "workloads/ssd/ssd_crop.h"

#include <algorithm>
#include <cmath>

#include "core/rng.h"

namespace mlpd {

namespace {

constexpr uint64_t kCropStream = 0x5353'4443'524F'5000ull;  // "SSDCROP"

struct Crop {
  float x1 = 0, y1 = 0, x2 = 1, y2 = 1;
};

double iou(const float* b, const Crop& c) {
  const double iw = std::max(0.0, double(std::min(b[2], c.x2)) - std::max(b[0], c.x1));
  const double ih = std::max(0.0, double(std::min(b[3], c.y2)) - std::max(b[1], c.y1));
  const double inter = iw * ih;
  const double uni = double(b[2] - b[0]) * (b[3] - b[1]) + double(c.x2 - c.x1) * (c.y2 - c.y1) - inter;
  return uni > 0 ? inter / uni : 0.0;
}

bool centre_inside(const float* b, const Crop& c) {
  const float cx = 0.5f * (b[0] + b[2]), cy = 0.5f * (b[1] + b[3]);
  return cx > c.x1 && cx < c.x2 && cy > c.y1 && cy < c.y2;
}

// Draws the crop of one image: false when the mode is "keep the image".
bool draw_crop(const float* boxes, int nb, int max_samples, uint64_t seed, uint64_t stream, Crop& out) {
  static constexpr double kMinIou[7] = {-1, 0.1, 0.3, 0.5, 0.7, 0.9, -1};  // mode 0: keep; 6: any
  uint64_t counter = 0;
  auto u = [&] { return rng_uniform(seed, stream, counter++); };
  if (nb == 0) return false;
  // The reference loops until a mode succeeds; bounded here (a mode that cannot succeed, e.g. IoU
  // 0.9 with far-apart boxes, is redrawn; 1000 rounds never all fail in practice).
  for (int round = 0; round < 1000; ++round) {
    const int mode = static_cast<int>(rng_below(seed, stream, counter++, 7));
    if (mode == 0) return false;
    const double min_iou = kMinIou[mode];
    for (int t = 0; t < max_samples; ++t) {
      const float w = 0.3f + 0.7f * u(), h = 0.3f + 0.7f * u();
      const float left = (1.0f - w) * u(), top = (1.0f - h) * u();
      if (w / h < 0.5f || w / h > 2.0f) continue;
      const Crop c{left, top, left + w, top + h};
      bool ok = true, any_inside = false;
      for (int i = 0; i < nb && ok; ++i) {
        ok = iou(boxes + 4 * i, c) > min_iou;
        any_inside = any_inside || centre_inside(boxes + 4 * i, c);
      }
      if (!ok || !any_inside) continue;
      out = c;
      return true;
    }
  }
  return false;
}

// Bilinear resize of the crop region of img [h, w, c] back to [h, w, c], in place via scratch.
void resize_crop(float* img, int h, int w, int c, const Crop& cr, std::vector<float>& tmp) {
  tmp.assign(img, img + size_t(h) * w * c);
  const float sx = cr.x2 - cr.x1, sy = cr.y2 - cr.y1;  // source pixels per output pixel
  for (int y = 0; y < h; ++y) {
    const float fy = std::clamp(cr.y1 * h + (y + 0.5f) * sy - 0.5f, 0.0f, float(h - 1));
    const int y0 = static_cast<int>(fy), y1 = std::min(y0 + 1, h - 1);
    const float ay = fy - y0;
    for (int x = 0; x < w; ++x) {
      const float fx = std::clamp(cr.x1 * w + (x + 0.5f) * sx - 0.5f, 0.0f, float(w - 1));
      const int x0 = static_cast<int>(fx), x1 = std::min(x0 + 1, w - 1);
      const float ax = fx - x0;
      for (int k = 0; k < c; ++k) {
        const float p00 = tmp[(size_t(y0) * w + x0) * c + k], p01 = tmp[(size_t(y0) * w + x1) * c + k];
        const float p10 = tmp[(size_t(y1) * w + x0) * c + k], p11 = tmp[(size_t(y1) * w + x1) * c + k];
        img[(size_t(y) * w + x) * c + k] =
            (1 - ay) * ((1 - ax) * p00 + ax * p01) + ay * ((1 - ax) * p10 + ax * p11);
      }
    }
  }
}

}  // namespace

void random_crop_batch(DetectionBatch& b, int h, int w, int c, int max_samples, uint64_t seed, int epoch,
                       const int64_t* image_index, CropScratch& s) {
  s.boxes.clear();
  s.labels.clear();
  s.instance.clear();
  s.first.assign(1, 0);
  const size_t per_image = size_t(h) * w * c;
  for (int i = 0; i < b.n; ++i) {
    const int g0 = b.gt_first[size_t(i)], g1 = b.gt_first[size_t(i) + 1];
    const float* boxes = b.gt_boxes.data() + 4 * size_t(g0);
    const uint64_t stream = kCropStream ^ (uint64_t(uint32_t(epoch)) << 40) ^ uint64_t(image_index[i]);
    Crop cr;
    const bool cropped = draw_crop(boxes, g1 - g0, max_samples, seed, stream, cr);
    if (cropped) resize_crop(b.x.data() + per_image * size_t(i), h, w, c, cr, s.image);
    const float cw = cr.x2 - cr.x1, ch = cr.y2 - cr.y1;
    for (int g = g0; g < g1; ++g) {
      const float* bx = b.gt_boxes.data() + 4 * size_t(g);
      if (cropped && !centre_inside(bx, cr)) continue;
      const float x1 = (std::clamp(bx[0], cr.x1, cr.x2) - cr.x1) / cw, y1 = (std::clamp(bx[1], cr.y1, cr.y2) - cr.y1) / ch;
      const float x2 = (std::clamp(bx[2], cr.x1, cr.x2) - cr.x1) / cw, y2 = (std::clamp(bx[3], cr.y1, cr.y2) - cr.y1) / ch;
      s.boxes.insert(s.boxes.end(), {x1, y1, x2, y2});
      s.labels.push_back(b.gt_labels[size_t(g)]);
      s.instance.push_back(b.gt_instance[size_t(g)]);
    }
    s.first.push_back(static_cast<int32_t>(s.labels.size()));
  }
  b.gt_boxes.swap(s.boxes);
  b.gt_labels.swap(s.labels);
  b.gt_instance.swap(s.instance);
  b.gt_first.swap(s.first);
}

}  // namespace mlpd
