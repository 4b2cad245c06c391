#include "detection/coco_json.h"

#include <map>
#include <stdexcept>
#include <string>

namespace mlpd {

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw std::invalid_argument(where + ": " + what);
}

const json& field(const json& o, const char* name, const std::string& where) {
  if (!o.is_object()) bad(where, "is not an object");
  auto it = o.find(name);
  if (it == o.end()) bad(where, std::string("has no \"") + name + "\"");
  return *it;
}

double number(const json& v, const std::string& where) {
  if (!v.is_number() || v.is_boolean()) bad(where, "is not a number");
  return v.get<double>();
}

int64_t integer(const json& v, const std::string& where) {
  if (!v.is_number_integer()) bad(where, "is not an integer");
  return v.get<int64_t>();
}

void read_box(const json& v, double box[4], const std::string& where) {
  if (!v.is_array() || v.size() != 4) bad(where, "is not 4 numbers [x, y, w, h]");
  for (size_t k = 0; k < 4; ++k) box[k] = number(v[k], where + "[" + std::to_string(k) + "]");
}

// A segmentation: polygons [[x, y, ...], ...], or RLE {"size": [h, w], "counts": string or list}.
Rle read_segmentation(const json& s, int h, int w, const std::string& where) {
  if (s.is_array()) {
    std::vector<std::vector<double>> polys;
    for (size_t p = 0; p < s.size(); ++p) {
      if (!s[p].is_array()) bad(where + "[" + std::to_string(p) + "]", "is not a polygon (list of numbers)");
      std::vector<double> xy;
      for (size_t k = 0; k < s[p].size(); ++k) xy.push_back(number(s[p][k], where + "[" + std::to_string(p) + "]"));
      polys.push_back(std::move(xy));
    }
    try {
      return rle_from_polygons(polys, h, w);
    } catch (const std::invalid_argument& e) {
      bad(where, e.what());
    }
  }
  const json& size = field(s, "size", where);
  if (!size.is_array() || size.size() != 2) bad(where + ".size", "is not [h, w]");
  const int rh = int(integer(size[0], where + ".size[0]")), rw = int(integer(size[1], where + ".size[1]"));
  if (rh != h || rw != w)
    bad(where + ".size", "is " + std::to_string(rh) + "x" + std::to_string(rw) + " but the image is " +
                             std::to_string(h) + "x" + std::to_string(w));
  const json& counts = field(s, "counts", where);
  if (counts.is_string()) {
    try {
      return rle_from_string(counts.get<std::string>(), h, w);
    } catch (const std::invalid_argument& e) {
      bad(where + ".counts", e.what());
    }
  }
  if (!counts.is_array()) bad(where + ".counts", "is neither a string nor a list");
  Rle r;
  r.h = h;
  r.w = w;
  uint64_t total = 0;
  for (size_t k = 0; k < counts.size(); ++k) {
    const int64_t c = integer(counts[k], where + ".counts[" + std::to_string(k) + "]");
    if (c < 0) bad(where + ".counts", "has a negative count");
    r.counts.push_back(uint32_t(c));
    total += uint64_t(c);
  }
  if (total != uint64_t(h) * uint64_t(w)) bad(where + ".counts", "do not sum to h*w");
  return r;
}

}  // namespace

Rle coco_segmentation_rle(const json& segmentation, int h, int w, const std::string& where) {
  return read_segmentation(segmentation, h, w, where);
}

CocoGroundTruth coco_read_ground_truth(const json& j, bool with_masks) {
  CocoGroundTruth gt;
  std::map<int64_t, std::pair<int, int>> sizes;
  const json& images = field(j, "images", "ground truth");
  if (!images.is_array()) bad("ground truth images", "is not a list");
  for (size_t i = 0; i < images.size(); ++i) {
    const std::string at = "images[" + std::to_string(i) + "]";
    CocoImage im;
    im.id = integer(field(images[i], "id", at), at + ".id");
    im.height = int(integer(field(images[i], "height", at), at + ".height"));
    im.width = int(integer(field(images[i], "width", at), at + ".width"));
    if (im.height < 1 || im.width < 1) bad(at, "has a non-positive size");
    sizes[im.id] = {im.height, im.width};
    gt.images.push_back(im);
  }
  const json& cats = field(j, "categories", "ground truth");
  if (!cats.is_array()) bad("ground truth categories", "is not a list");
  for (size_t i = 0; i < cats.size(); ++i) {
    const std::string at = "categories[" + std::to_string(i) + "]";
    gt.category_ids.push_back(int32_t(integer(field(cats[i], "id", at), at + ".id")));
  }
  const json& anns = field(j, "annotations", "ground truth");
  if (!anns.is_array()) bad("ground truth annotations", "is not a list");
  for (size_t i = 0; i < anns.size(); ++i) {
    const std::string at = "annotations[" + std::to_string(i) + "]";
    const json& o = anns[i];
    CocoAnnotation a;
    a.id = integer(field(o, "id", at), at + ".id");
    a.image_id = integer(field(o, "image_id", at), at + ".image_id");
    a.category_id = int32_t(integer(field(o, "category_id", at), at + ".category_id"));
    read_box(field(o, "bbox", at), a.bbox, at + ".bbox");
    a.area = number(field(o, "area", at), at + ".area");
    auto crowd = o.find("iscrowd");
    a.iscrowd = crowd != o.end() && number(*crowd, at + ".iscrowd") != 0;
    auto sz = sizes.find(a.image_id);
    if (sz == sizes.end()) bad(at + ".image_id", std::to_string(a.image_id) + " is not among the images");
    if (with_masks) {
      a.mask = read_segmentation(field(o, "segmentation", at), sz->second.first, sz->second.second,
                                 at + ".segmentation");
      a.has_mask = true;
    }
    gt.annotations.push_back(std::move(a));
  }
  return gt;
}

std::vector<CocoDetection> coco_read_detections(const json& j, const CocoGroundTruth& gt, CocoIouType type) {
  if (!j.is_array()) bad("results", "is not a list of detections");
  std::map<int64_t, std::pair<int, int>> sizes;
  for (const CocoImage& im : gt.images) sizes[im.id] = {im.height, im.width};
  std::vector<CocoDetection> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string at = "results[" + std::to_string(i) + "]";
    const json& o = j[i];
    CocoDetection d;
    d.image_id = integer(field(o, "image_id", at), at + ".image_id");
    d.category_id = int32_t(integer(field(o, "category_id", at), at + ".category_id"));
    d.score = number(field(o, "score", at), at + ".score");
    auto sz = sizes.find(d.image_id);
    if (sz == sizes.end()) bad(at + ".image_id", std::to_string(d.image_id) + " is not an image of the ground truth");
    if (type == CocoIouType::Segm) {
      d.mask = read_segmentation(field(o, "segmentation", at), sz->second.first, sz->second.second,
                                 at + ".segmentation");
      d.has_mask = true;
      rle_to_bbox(d.mask, d.bbox);
    } else {
      read_box(field(o, "bbox", at), d.bbox, at + ".bbox");
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace mlpd
