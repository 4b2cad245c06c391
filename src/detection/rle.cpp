#include "detection/rle.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace mlpd {

Rle rle_encode(const uint8_t* mask, int h, int w) {
  Rle r;
  r.h = h;
  r.w = w;
  // Column-major scan, as COCO: pixel (y, x) is position x*h + y.
  uint8_t current = 0;
  uint32_t run = 0;
  for (int x = 0; x < w; ++x)
    for (int y = 0; y < h; ++y) {
      const uint8_t v = mask[size_t(y) * w + x] ? 1 : 0;
      if (v != current) {
        r.counts.push_back(run);
        run = 0;
        current = v;
      }
      ++run;
    }
  r.counts.push_back(run);
  return r;
}

void rle_decode(const Rle& rle, uint8_t* mask) {
  size_t pos = 0;
  uint8_t v = 0;
  const size_t total = size_t(rle.h) * rle.w;
  for (uint32_t c : rle.counts) {
    for (uint32_t k = 0; k < c && pos < total; ++k, ++pos) {
      const size_t x = pos / size_t(rle.h), y = pos % size_t(rle.h);
      mask[y * size_t(rle.w) + x] = v;
    }
    v ^= 1;
  }
}

uint64_t rle_area(const Rle& rle) {
  uint64_t a = 0;
  for (size_t i = 1; i < rle.counts.size(); i += 2) a += rle.counts[i];
  return a;
}

double rle_iou(const Rle& a, const Rle& b, bool crowd_b) {
  // Walk both run lists together, counting the overlap of their foreground runs.
  uint64_t inter = 0;
  size_t ia = 0, ib = 0;
  uint64_t ca = a.counts.empty() ? 0 : a.counts[0], cb = b.counts.empty() ? 0 : b.counts[0];
  bool va = false, vb = false;
  while (ia < a.counts.size() && ib < b.counts.size()) {
    const uint64_t step = std::min(ca, cb);
    if (va && vb) inter += step;
    ca -= step;
    cb -= step;
    if (ca == 0) {
      if (++ia < a.counts.size()) ca = a.counts[ia];
      va = !va;
    }
    if (cb == 0) {
      if (++ib < b.counts.size()) cb = b.counts[ib];
      vb = !vb;
    }
  }
  const uint64_t area_a = rle_area(a), area_b = rle_area(b);
  const uint64_t uni = crowd_b ? area_a : area_a + area_b - inter;
  return uni > 0 ? double(inter) / double(uni) : 0.0;
}

void rle_to_bbox(const Rle& rle, double box[4]) {
  box[0] = box[1] = box[2] = box[3] = 0;
  if (rle_area(rle) == 0) return;
  const uint64_t h = uint64_t(rle.h);
  uint64_t pos = 0, xs = ~0ull, xe = 0, ys = h, ye = 0;
  for (size_t i = 0; i < rle.counts.size(); ++i) {
    const uint64_t c = rle.counts[i];
    if (i % 2 == 1 && c > 0) {
      const uint64_t first = pos, last = pos + c - 1;
      const uint64_t x0 = first / h, x1 = last / h;
      xs = std::min(xs, x0);
      xe = std::max(xe, x1);
      if (x0 == x1) {
        ys = std::min(ys, first % h);
        ye = std::max(ye, last % h);
      } else {  // the run wraps over a column: it covers rows 0..h-1 somewhere
        ys = 0;
        ye = h - 1;
      }
    }
    pos += c;
  }
  box[0] = double(xs);
  box[1] = double(ys);
  box[2] = double(xe - xs + 1);
  box[3] = double(ye - ys + 1);
}

std::string rle_to_string(const Rle& rle) {
  std::string s;
  for (size_t i = 0; i < rle.counts.size(); ++i) {
    int64_t x = int64_t(rle.counts[i]);
    if (i > 2) x -= int64_t(rle.counts[i - 2]);
    bool more = true;
    while (more) {
      int64_t c = x & 0x1f;
      x >>= 5;
      more = (c & 0x10) ? x != -1 : x != 0;
      if (more) c |= 0x20;
      s.push_back(char(c + 48));
    }
  }
  return s;
}

Rle rle_from_string(const std::string& s, int h, int w) {
  Rle r;
  r.h = h;
  r.w = w;
  size_t p = 0;
  while (p < s.size()) {
    int64_t x = 0;
    int k = 0;
    bool more = true;
    while (more) {
      if (p >= s.size()) throw std::invalid_argument("RLE string ends inside a count");
      const int64_t c = int64_t(s[p]) - 48;
      if (c < 0 || c > 63) throw std::invalid_argument("RLE string has a character outside '0'..'o'");
      x |= (c & 0x1f) << (5 * k);
      more = (c & 0x20) != 0;
      ++p;
      ++k;
      if (!more && (c & 0x10)) x |= -1ll << (5 * k);
      if (k > 12) throw std::invalid_argument("RLE string count too long");
    }
    if (r.counts.size() > 2) x += int64_t(r.counts[r.counts.size() - 2]);
    if (x < 0 || x > int64_t(UINT32_MAX)) throw std::invalid_argument("RLE string decodes to a negative count");
    r.counts.push_back(uint32_t(x));
  }
  uint64_t total = 0;
  for (uint32_t c : r.counts) total += c;
  if (total != uint64_t(h) * uint64_t(w))
    throw std::invalid_argument("RLE counts sum to " + std::to_string(total) + ", not " + std::to_string(h) + "x" +
                                std::to_string(w));
  return r;
}

}  // namespace mlpd

namespace mlpd {

namespace {

// pycocotools' rleFrPoly for one polygon: the boundary walked at 5x resolution, its crossings of
// pixel-centre columns downsampled to y-boundary points, which become the run starts and ends.
Rle rle_from_polygon(const std::vector<double>& xy, int h, int w) {
  const size_t k = xy.size() / 2;
  const double scale = 5;
  std::vector<int> x(k + 1), y(k + 1);
  for (size_t j = 0; j < k; ++j) x[j] = int(scale * xy[j * 2] + .5);
  x[k] = x[0];
  for (size_t j = 0; j < k; ++j) y[j] = int(scale * xy[j * 2 + 1] + .5);
  y[k] = y[0];
  std::vector<int> u, v;
  for (size_t j = 0; j < k; ++j) {
    int xs = x[j], xe = x[j + 1], ys = y[j], ye = y[j + 1];
    const int dx = std::abs(xe - xs), dy = std::abs(ys - ye);
    const bool flip = (dx >= dy && xs > xe) || (dx < dy && ys > ye);
    if (flip) {
      std::swap(xs, xe);
      std::swap(ys, ye);
    }
    const double s = dx >= dy ? double(ye - ys) / dx : double(xe - xs) / dy;
    if (dx >= dy) {
      for (int d = 0; d <= dx; ++d) {
        const int t = flip ? dx - d : d;
        u.push_back(t + xs);
        v.push_back(int(ys + s * t + .5));
      }
    } else {
      for (int d = 0; d <= dy; ++d) {
        const int t = flip ? dy - d : d;
        v.push_back(t + ys);
        u.push_back(int(xs + s * t + .5));
      }
    }
  }
  std::vector<uint32_t> a;
  for (size_t j = 1; j < u.size(); ++j) {
    if (u[j] == u[j - 1]) continue;
    double xd = double(u[j] < u[j - 1] ? u[j] : u[j - 1]);
    xd = (xd + .5) / scale - .5;
    if (std::floor(xd) != xd || xd < 0 || xd > w - 1) continue;
    double yd = double(v[j] < v[j - 1] ? v[j] : v[j - 1]);
    yd = (yd + .5) / scale - .5;
    if (yd < 0) yd = 0;
    else if (yd > h) yd = h;
    yd = std::ceil(yd);
    a.push_back(uint32_t(int(xd) * h + int(yd)));
  }
  a.push_back(uint32_t(h) * uint32_t(w));
  std::sort(a.begin(), a.end());
  uint32_t p = 0;
  for (uint32_t& t : a) {
    const uint32_t cur = t;
    t -= p;
    p = cur;
  }
  Rle r;
  r.h = h;
  r.w = w;
  size_t j = 0;
  r.counts.push_back(a[j++]);
  while (j < a.size()) {
    if (a[j] > 0) {
      r.counts.push_back(a[j++]);
    } else {
      ++j;
      if (j < a.size()) r.counts.back() += a[j++];
    }
  }
  return r;
}

}  // namespace

Rle rle_from_polygons(const std::vector<std::vector<double>>& polygons, int h, int w) {
  std::vector<uint8_t> merged(size_t(h) * w, 0), one(size_t(h) * w);
  for (const auto& poly : polygons) {
    if (poly.size() < 6 || poly.size() % 2) throw std::invalid_argument("a polygon needs at least 3 points (x, y)");
    rle_decode(rle_from_polygon(poly, h, w), one.data());
    for (size_t i = 0; i < one.size(); ++i) merged[i] |= one[i];
  }
  return rle_encode(merged.data(), h, w);
}

}  // namespace mlpd
