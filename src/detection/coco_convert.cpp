#include "detection/coco_convert.h"

#include <spdlog/spdlog.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "datasets/h5.h"
#include "datasets/layout.h"
#include "detection/coco_json.h"
#include "detection/detection_data.h"
#include "detection/resize.h"

namespace mlpd {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

[[noreturn]] void bad(const std::string& path, const std::string& why) {
  throw UserError("prepare --coco: " + path + ": " + why, 2);
}

json read_json(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) bad(path, "cannot be opened (expected COCO 2017's annotations/instances_*.json)");
  try {
    return json::parse(f);
  } catch (const json::exception& e) {
    bad(path, std::string("not valid JSON: ") + e.what());
  }
}

struct Jpeg {
  tjhandle h = tjInitDecompress();
  ~Jpeg() {
    if (h) tjDestroy(h);
  }
};

// RGB pixels [h, w, 3] of a JPEG file.
std::vector<uint8_t> decode_jpeg(Jpeg& jpeg, const std::string& path, int& w, int& h) {
  std::ifstream f(path, std::ios::binary);
  if (!f) bad(path, "image file missing");
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  int subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(jpeg.h, bytes.data(), (unsigned long)bytes.size(), &w, &h, &subsamp, &colorspace) != 0)
    bad(path, std::string("not a readable JPEG: ") + tjGetErrorStr2(jpeg.h));
  if (w < 1 || h < 1 || w > 20000 || h > 20000) bad(path, "implausible JPEG size");
  std::vector<uint8_t> rgb(size_t(w) * h * 3);
  if (tjDecompress2(jpeg.h, bytes.data(), (unsigned long)bytes.size(), rgb.data(), w, 0, h, TJPF_RGB, 0) != 0)
    bad(path, std::string("corrupt JPEG: ") + tjGetErrorStr2(jpeg.h));
  return rgb;
}

Rle resize_mask(const Rle& m, int s) {
  std::vector<uint8_t> dense(size_t(m.h) * m.w), out(size_t(s) * s);
  rle_decode(m, dense.data());
  for (int y = 0; y < s; ++y) {
    const int sy = std::min(m.h - 1, int((y + 0.5) * m.h / s));
    for (int x = 0; x < s; ++x) out[size_t(y) * s + x] = dense[size_t(sy) * m.w + std::min(m.w - 1, int((x + 0.5) * m.w / s))];
  }
  return rle_encode(out.data(), s, s);
}

struct Split {
  std::string json_path, image_dir;
  bool keep_empty;
};

// Writes one split; returns (images, instances).
std::pair<int64_t, int64_t> convert_split(DetectionWriter& out, const char* name, const Split& sp, const json& j,
                                          const std::map<int64_t, int32_t>& cat_index, const CocoConvertOptions& o) {
  const int S = o.image_size;
  std::map<int64_t, std::vector<const json*>> anns;
  try {
    for (const json& a : j.at("annotations")) anns[a.at("image_id").get<int64_t>()].push_back(&a);
  } catch (const json::exception& e) {
    bad(sp.json_path, std::string("annotations: ") + e.what());
  }
  std::vector<const json*> images;
  for (const json& im : j.at("images"))
    if (sp.keep_empty || anns.count(im.at("id").get<int64_t>())) images.push_back(&im);
  std::sort(images.begin(), images.end(),
            [](const json* a, const json* b) { return a->at("id").get<int64_t>() < b->at("id").get<int64_t>(); });
  if (o.max_images > 0 && int64_t(images.size()) > o.max_images) images.resize(size_t(o.max_images));
  if (images.empty()) bad(sp.json_path, "no images to convert");
  out.begin_split(name, int64_t(images.size()), S, S, 3);
  Jpeg jpeg;
  int64_t instances = 0;
  std::vector<DetectionInstance> inst;
  for (size_t i = 0; i < images.size(); ++i) {
    const json& im = *images[i];
    const int64_t id = im.at("id").get<int64_t>();
    const std::string file = (fs::path(sp.image_dir) / im.at("file_name").get<std::string>()).string();
    int w = 0, h = 0;
    const std::vector<uint8_t> rgb = decode_jpeg(jpeg, file, w, h);
    if (w != im.value("width", w) || h != im.value("height", h))
      bad(file, "is " + std::to_string(w) + "x" + std::to_string(h) + " but " + sp.json_path + " says " +
                    std::to_string(im.value("width", 0)) + "x" + std::to_string(im.value("height", 0)));
    const double sx = double(S) / w, sy = double(S) / h;
    inst.clear();
    for (const json* ap : anns[id]) {
      const json& a = *ap;
      const std::string where = sp.json_path + " annotation " + std::to_string(a.value("id", int64_t(-1)));
      auto c = cat_index.find(a.at("category_id").get<int64_t>());
      if (c == cat_index.end()) bad(where, "category_id not among the categories");
      DetectionInstance d;
      const auto& bb = a.at("bbox");
      d.box[0] = float(bb.at(0).get<double>() * sx);
      d.box[1] = float(bb.at(1).get<double>() * sy);
      d.box[2] = float(bb.at(2).get<double>() * sx);
      d.box[3] = float(bb.at(3).get<double>() * sy);
      d.cls = c->second;
      d.iscrowd = a.value("iscrowd", 0) != 0;
      // COCO 2017 train holds a few polygons of fewer than 3 points: they cover nothing and are
      // dropped (as detectron2 does); an instance left without any keeps its box and an empty mask.
      json seg = a.at("segmentation");
      if (seg.is_array()) {
        json kept = json::array();
        for (const json& poly : seg)
          if (poly.is_array() && poly.size() >= 6) kept.push_back(poly);
        seg = std::move(kept);
      }
      try {
        d.mask = seg.is_array() && seg.empty() ? Rle{S, S, {uint32_t(S) * uint32_t(S)}}
                                               : resize_mask(coco_segmentation_rle(seg, h, w, where), S);
      } catch (const std::invalid_argument& e) {
        bad(sp.json_path, e.what());
      }
      d.area = float(rle_area(d.mask));
      inst.push_back(std::move(d));
    }
    instances += int64_t(inst.size());
    out.add_image(id, resize_bilinear_u8(rgb.data(), h, w, 3, S, S).data(), inst);
    if ((i + 1) % 5000 == 0) spdlog::info("prepare --coco: {} {}/{} images", name, i + 1, images.size());
  }
  return {int64_t(images.size()), instances};
}

}  // namespace

CocoConvertStats prepare_coco(const CocoConvertOptions& o, const std::string& out_h5, const std::string& benchmark) {
  if (o.image_size < 32 || o.image_size > 2048) throw UserError("prepare --coco: --image-size must be 32..2048", 2);
  const fs::path dir(o.coco_dir);
  const Split train{(dir / "annotations" / "instances_train2017.json").string(), (dir / "train2017").string(), false};
  const Split val{(dir / "annotations" / "instances_val2017.json").string(), (dir / "val2017").string(), true};
  const json jt = read_json(train.json_path);
  const json jv = read_json(val.json_path);
  // Categories: ascending ids -> 1..K (the val file must name the same ones).
  std::map<int64_t, std::string> cats;
  try {
    for (const json& c : jt.at("categories")) cats[c.at("id").get<int64_t>()] = c.at("name").get<std::string>();
  } catch (const json::exception& e) {
    bad(train.json_path, std::string("categories: ") + e.what());
  }
  if (cats.empty()) bad(train.json_path, "no categories");
  std::map<int64_t, int32_t> index;
  DetectionFileInfo info;
  std::string ids;
  for (const auto& [id, name] : cats) {
    index[id] = int32_t(index.size()) + 1;
    info.class_names.push_back(name);
    ids += (ids.empty() ? "" : ",") + std::to_string(id);
  }
  info.benchmark = benchmark;
  info.scale = "reference";
  info.source = "COCO 2017 from " + o.coco_dir + " (images resized to " + std::to_string(o.image_size) + "x" +
                std::to_string(o.image_size) + ", bilinear without antialiasing)";
  info.licence = "COCO: annotations CC BY 4.0; images under their Flickr terms";
  info.created_by = "mlperf-dist prepare --benchmark " + benchmark + " --scale reference --coco";
  info.extra_attrs.push_back({"coco_category_ids", ids});
  CocoConvertStats st;
  write_h5_atomically(out_h5, [&](const std::string& tmp) {
    DetectionWriter w(tmp, info);
    std::tie(st.train_images, st.train_instances) = convert_split(w, layout::kTrain, train, jt, index, o);
    const auto [mean, std] = w.pixel_stats();
    w.end_split(mean, std);
    std::tie(st.eval_images, st.eval_instances) = convert_split(w, layout::kEval, val, jv, index, o);
    w.end_split(mean, std);
    w.close();
  });
  return st;
}

}  // namespace mlpd
