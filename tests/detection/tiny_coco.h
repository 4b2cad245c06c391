// A tiny COCO 2017-format set written for tests: three train JPEGs (one grey, one without
// annotations), a train file with a polygon, a degenerate two-point polygon and a crowd RLE, and
// one val image, with one annotation (a polygon) where `val_annotations` or none. Used by
// tests/detection/coco_prepare_test.cpp and, through tests/detection/write_tiny_coco.cpp, by the
// reference-scale CLI test.
#pragma once
#include <turbojpeg.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/check.h"

namespace mlpd::test {

inline void write_jpeg(const std::string& path, int w, int h, int channels) {
  std::vector<unsigned char> px(size_t(w) * h * channels);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < channels; ++c) px[(size_t(y) * w + x) * channels + c] = (unsigned char)((x * 7 + y * 3 + c * 50) % 256);
  tjhandle t = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  MLPD_CHECK(tjCompress2(t, px.data(), w, 0, h, channels == 3 ? TJPF_RGB : TJPF_GRAY, &out, &size,
                         channels == 3 ? TJSAMP_444 : TJSAMP_GRAY, 95, 0) == 0,
             "write_jpeg: compression failed");
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<char*>(out), std::streamsize(size));
  tjFree(out);
  tjDestroy(t);
}

inline void write_tiny_coco(const std::filesystem::path& d, bool val_annotations = false) {
  std::filesystem::create_directories(d / "annotations");
  std::filesystem::create_directories(d / "train2017");
  std::filesystem::create_directories(d / "val2017");
  write_jpeg(d / "train2017/a.jpg", 64, 32, 3);
  write_jpeg(d / "train2017/b.jpg", 40, 40, 1);
  write_jpeg(d / "train2017/empty.jpg", 20, 20, 3);
  write_jpeg(d / "val2017/v.jpg", 32, 64, 3);
  using nlohmann::json;
  const json cats = json::array({{{"id", 90}, {"name", "toothbrush"}}, {{"id", 1}, {"name", "person"}}});
  json train = {{"categories", cats},
                {"images", json::array({{{"id", 7}, {"file_name", "a.jpg"}, {"height", 32}, {"width", 64}},
                                        {{"id", 3}, {"file_name", "b.jpg"}, {"height", 40}, {"width", 40}},
                                        {{"id", 9}, {"file_name", "empty.jpg"}, {"height", 20}, {"width", 20}}})},
                {"annotations",
                 json::array({{{"id", 1}, {"image_id", 7}, {"category_id", 90}, {"bbox", {8, 4, 32, 16}},
                               {"area", 512}, {"iscrowd", 0},
                               {"segmentation", json::array({json::array({8, 4, 40, 4, 40, 20, 8, 20})})}},
                              {{"id", 3}, {"image_id", 7}, {"category_id", 1}, {"bbox", {1, 1, 1, 1}}, {"area", 0},
                               {"iscrowd", 0}, {"segmentation", json::array({json::array({1, 1, 2, 2})})}},
                              {{"id", 2}, {"image_id", 3}, {"category_id", 1}, {"bbox", {0, 0, 40, 40}}, {"area", 1600},
                               {"iscrowd", 1}, {"segmentation", {{"size", {40, 40}}, {"counts", "0PP3"}}}}})}};
  // "0PP3" is a full 48x64 mask in pycocotools' string form: wrong size here, so use the list form.
  train["annotations"][2]["segmentation"] = {{"size", {40, 40}}, {"counts", json::array({0, 1600})}};
  json val = {{"categories", cats},
              {"images", json::array({{{"id", 5}, {"file_name", "v.jpg"}, {"height", 64}, {"width", 32}}})},
              {"annotations", json::array()}};
  if (val_annotations)
    val["annotations"].push_back({{"id", 11}, {"image_id", 5}, {"category_id", 1}, {"bbox", {4, 8, 20, 40}},
                                  {"area", 800}, {"iscrowd", 0},
                                  {"segmentation", json::array({json::array({4, 8, 24, 8, 24, 48, 4, 48})})}});
  std::ofstream((d / "annotations/instances_train2017.json")) << train.dump();
  std::ofstream((d / "annotations/instances_val2017.json")) << val.dump();
}

}  // namespace mlpd::test
