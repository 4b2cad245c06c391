// The scene generator (src/detection/scenes.h) on the real Fashion-MNIST items of the Debian
// package: the same seed gives the same bytes, another seed other scenes; every instance's mask,
// box and area agree with the canvas; and the loader and batch filler read it back consistently.
#include <gtest/gtest.h>

#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <vector>

#include "../datasets/temp_dir.h"
#include "core/check.h"
#include "datasets/fashion_mnist.h"
#include "detection/detection_data.h"
#include "detection/scenes.h"

using namespace mlpd;

namespace {

SceneOptions small(uint64_t seed) {
  SceneOptions o;
  o.fashion_mnist_dir = kFashionMnistDebianDir;
  o.seed = seed;
  o.train_scenes = 300;
  o.eval_scenes = 50;
  return o;
}

std::vector<char> bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST(Scenes, SameSeedSameBytesOtherSeedOtherScenes) {
  TempDir d;
  prepare_scenes(small(1), d / "a.h5", "ssd");
  prepare_scenes(small(1), d / "b.h5", "ssd");
  prepare_scenes(small(2), d / "c.h5", "ssd");
  const DetectionSplit a = load_detection_split(d / "a.h5", "train"), b = load_detection_split(d / "b.h5", "train");
  const DetectionSplit c = load_detection_split(d / "c.h5", "train");
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.boxes, b.boxes);
  EXPECT_EQ(a.mask_counts, b.mask_counts);
  EXPECT_NE(a.images, c.images);
  // HDF5 writes no time stamps here: the files themselves are equal byte for byte.
  EXPECT_EQ(bytes_of(d / "a.h5"), bytes_of(d / "b.h5"));
}

TEST(Scenes, MasksBoxesAndAreasAgreeWithThePixels) {
  TempDir d;
  const SceneOptions o = small(3);
  prepare_scenes(o, d / "s.h5", "ssd");
  for (const char* split : {"train", "eval"}) {
    const DetectionSplit s = load_detection_split(d / "s.h5", split);
    ASSERT_EQ(s.h, 96);
    ASSERT_EQ(s.c, 1);
    EXPECT_EQ(s.num_classes, 10);
    std::set<int32_t> seen;
    std::vector<uint8_t> mask(size_t(s.h) * s.w), owner(size_t(s.h) * s.w);
    for (int64_t i = 0; i < s.count; ++i) {
      const int64_t first = s.inst_first[size_t(i)], last = s.inst_first[size_t(i) + 1];
      EXPECT_LE(last - first, 4);
      std::fill(owner.begin(), owner.end(), 0);
      const uint8_t* img = s.images.data() + size_t(i) * s.h * s.w;
      for (int64_t j = first; j < last; ++j) {
        seen.insert(s.classes[size_t(j)]);
        rle_decode(instance_mask(s, j), mask.data());
        uint64_t area = 0;
        int x0 = s.w, y0 = s.h, x1 = -1, y1 = -1;
        for (int y = 0; y < s.h; ++y)
          for (int x = 0; x < s.w; ++x) {
            const size_t at = size_t(y) * s.w + x;
            if (!mask[at]) continue;
            ++area;
            ASSERT_GT(img[at], o.mask_threshold) << "mask pixel below the threshold, image " << i;
            ASSERT_EQ(owner[at], 0) << "masks of one image overlap, image " << i;
            owner[at] = 1;
            x0 = std::min(x0, x), y0 = std::min(y0, y), x1 = std::max(x1, x), y1 = std::max(y1, y);
          }
        EXPECT_EQ(double(s.area[size_t(j)]), double(area));
        EXPECT_GE(area, 30u);
        const float* b = &s.boxes[4 * size_t(j)];
        EXPECT_EQ(b[0], float(x0));
        EXPECT_EQ(b[1], float(y0));
        EXPECT_EQ(b[2], float(x1 - x0 + 1));
        EXPECT_EQ(b[3], float(y1 - y0 + 1));
      }
    }
    EXPECT_EQ(seen.size(), 10u) << split;
  }
}

TEST(DetectionData, FlipMirrorsPixelsAndBoxesTogether) {
  TempDir d;
  prepare_scenes(small(4), d / "s.h5", "ssd");
  const DetectionSplit s = load_detection_split(d / "s.h5", "train");
  std::vector<int64_t> idx(64);
  for (int i = 0; i < 64; ++i) idx[size_t(i)] = i;
  DetectionBatch plain, aug;
  fill_detection_batch(s, idx.data(), 64, false, 9, 0, plain);
  fill_detection_batch(s, idx.data(), 64, true, 9, 0, aug);
  int flipped = 0;
  const size_t per = size_t(s.h) * s.w;
  for (int i = 0; i < 64; ++i) {
    const bool f = aug.flipped[size_t(i)] != 0;
    flipped += f;
    for (int y = 0; y < s.h; ++y)
      for (int x = 0; x < s.w; ++x)
        ASSERT_EQ(aug.x[per * i + size_t(y) * s.w + x], plain.x[per * i + size_t(y) * s.w + (f ? s.w - 1 - x : x)]);
    for (int g = aug.gt_first[size_t(i)]; g < aug.gt_first[size_t(i) + 1]; ++g) {
      const float* a = &aug.gt_boxes[4 * size_t(g)];
      const float* p = &plain.gt_boxes[4 * size_t(g)];
      EXPECT_FLOAT_EQ(a[0], f ? 1.0f - p[2] : p[0]);
      EXPECT_FLOAT_EQ(a[2], f ? 1.0f - p[0] : p[2]);
      EXPECT_FLOAT_EQ(a[1], p[1]);
    }
  }
  EXPECT_GT(flipped, 16);  // about half
  EXPECT_LT(flipped, 48);
  // The same (seed, epoch) flips the same images; another epoch others.
  DetectionBatch again, other;
  fill_detection_batch(s, idx.data(), 64, true, 9, 0, again);
  fill_detection_batch(s, idx.data(), 64, true, 9, 1, other);
  EXPECT_EQ(again.flipped, aug.flipped);
  EXPECT_NE(other.flipped, aug.flipped);
}

// A file whose offsets, classes or masks lie is refused before training, naming the dataset.
TEST(DetectionData, CorruptedFilesAreRefusedNamingTheDataset) {
  TempDir d;
  prepare_scenes(small(5), d / "s.h5", "ssd");
  auto corrupt = [&](const char* dataset, auto value, hid_t mem_type, hsize_t at, const std::string& expect) {
    const std::string path = d / (std::string("bad_") + std::to_string(at) + "_" + expect.substr(0, 5) + ".h5");
    std::filesystem::copy_file(d / "s.h5", path, std::filesystem::copy_options::overwrite_existing);
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t ds = H5Dopen2(f, dataset, H5P_DEFAULT);
    hid_t space = H5Dget_space(ds);
    H5Sselect_elements(space, H5S_SELECT_SET, 1, &at);
    const hsize_t one = 1;
    hid_t mem = H5Screate_simple(1, &one, nullptr);
    H5Dwrite(ds, mem_type, mem, space, H5P_DEFAULT, &value);
    H5Sclose(mem);
    H5Sclose(space);
    H5Dclose(ds);
    H5Fclose(f);
    try {
      check_detection_data(path);
      ADD_FAILURE() << dataset << ": accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
  };
  corrupt("/train/inst_first", int64_t(1000000), H5T_NATIVE_INT64, 3, "inst_first");
  corrupt("/train/classes", int32_t(0), H5T_NATIVE_INT32, 2, "classes");
  corrupt("/eval/classes", int32_t(11), H5T_NATIVE_INT32, 0, "outside 1..10");
  corrupt("/train/mask_counts", uint32_t(7), H5T_NATIVE_UINT32, 0, "mask of instance 0");
  EXPECT_THROW(check_detection_data(d / "missing.h5"), UserError);
}
