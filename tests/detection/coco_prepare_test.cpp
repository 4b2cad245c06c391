// `prepare --coco` (src/detection/coco_convert.h) on a tiny COCO-format set written here: three
// JPEGs (one grey), a train file with a polygon, an RLE (string counts) and a crowd annotation and
// one image without annotations (left out of train), a val file; then what the loader reads back.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "../datasets/temp_dir.h"
#include "tiny_coco.h"
#include "core/check.h"
#include "detection/coco_convert.h"
#include "detection/detection_data.h"

using namespace mlpd;

namespace {

void write_set(const TempDir& d) { test::write_tiny_coco(d.path); }

}  // namespace

TEST(CocoPrepare, ConvertsImagesBoxesMasksAndCategories) {
  TempDir d;
  write_set(d);
  CocoConvertOptions o;
  o.coco_dir = d.path.string();
  o.image_size = 32;
  const CocoConvertStats st = prepare_coco(o, d / "out.h5", "ssd");
  EXPECT_EQ(st.train_images, 2);  // the image without annotations is left out
  EXPECT_EQ(st.eval_images, 1);   // val keeps every image
  check_detection_data(d / "out.h5");
  const DetectionSplit t = load_detection_split(d / "out.h5", "train");
  EXPECT_EQ(t.c, 3);
  EXPECT_EQ(t.h, 32);
  EXPECT_EQ(t.num_classes, 2);
  EXPECT_EQ(t.class_names, (std::vector<std::string>{"person", "toothbrush"}));  // ascending COCO ids
  EXPECT_EQ(t.image_ids, (std::vector<int64_t>{3, 7}));
  ASSERT_EQ(t.classes.size(), 3u);
  // Image 3 (40x40 -> 32x32): the crowd "person", a full mask.
  EXPECT_EQ(t.classes[0], 1);
  EXPECT_EQ(t.iscrowd[0], 1);
  EXPECT_FLOAT_EQ(t.area[0], 32.0f * 32.0f);
  // Image 7 (64x32 -> 32x32): the toothbrush box scaled by (0.5, 1).
  EXPECT_EQ(t.classes[1], 2);
  EXPECT_FLOAT_EQ(t.boxes[4], 4.0f);
  EXPECT_FLOAT_EQ(t.boxes[5], 4.0f);
  EXPECT_FLOAT_EQ(t.boxes[6], 16.0f);
  EXPECT_FLOAT_EQ(t.boxes[7], 16.0f);
  // Its polygon mask covers about the box: 16 x 16 = 256 pixels after resizing.
  EXPECT_NEAR(t.area[1], 256.0f, 40.0f);
  // A two-point "polygon" (COCO has a few) is dropped: the instance keeps its box, an empty mask.
  EXPECT_EQ(t.classes[2], 1);
  EXPECT_FLOAT_EQ(t.area[2], 0.0f);
  const DetectionSplit v = load_detection_split(d / "out.h5", "eval");
  EXPECT_EQ(v.count, 1);
  EXPECT_EQ(v.inst_first, (std::vector<int64_t>{0, 0}));
}

TEST(CocoPrepare, CorruptOrMissingInputsAreNamed) {
  TempDir d;
  write_set(d);
  CocoConvertOptions o;
  o.coco_dir = d.path.string();
  o.image_size = 32;
  std::ofstream(d / "train2017/a.jpg", std::ios::trunc) << "not a jpeg";
  try {
    prepare_coco(o, d / "out.h5", "ssd");
    FAIL() << "a corrupt JPEG was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("a.jpg"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(d / "out.h5"));  // nothing half-written
  test::write_jpeg(d / "train2017/a.jpg", 60, 32, 3);  // not the 64x32 the JSON says
  try {
    prepare_coco(o, d / "out.h5", "ssd");
    FAIL() << "a size mismatch was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("but"), std::string::npos) << e.what();
  }
  std::filesystem::remove(d / "annotations/instances_val2017.json");
  EXPECT_THROW(prepare_coco(o, d / "out.h5", "ssd"), UserError);
}
