// COCO RLE masks (src/detection/rle.h). Expected strings, areas and boxes of the polygon cases
// come from pycocotools 2.0.x: mask.merge(mask.frPyObjects(polygons, 48, 64)), then its
// ['counts'], mask.area and mask.toBbox.
#include <gtest/gtest.h>

#include <vector>

#include "detection/rle.h"

using namespace mlpd;

TEST(Rle, EncodeDecodeRoundTripColumnMajor) {
  const int h = 3, w = 4;
  // Row-major mask; COCO counts run down the columns.
  const std::vector<uint8_t> m = {0, 1, 1, 0,  //
                                  0, 1, 0, 0,  //
                                  1, 1, 0, 1};
  const Rle r = rle_encode(m.data(), h, w);
  // Columns 001, 111, 100, 001: runs of 2 zeros, 5 ones, 4 zeros, 1 one.
  EXPECT_EQ(r.counts, (std::vector<uint32_t>{2, 5, 4, 1}));
  std::vector<uint8_t> back(m.size());
  rle_decode(r, back.data());
  EXPECT_EQ(back, m);
  EXPECT_EQ(rle_area(r), 6u);
  double box[4];
  rle_to_bbox(r, box);
  EXPECT_EQ(std::vector<double>(box, box + 4), (std::vector<double>{0, 0, 4, 3}));
  // A mask starting with a 1 has a first count of 0.
  const std::vector<uint8_t> one = {1, 0, 0, 0};
  EXPECT_EQ(rle_encode(one.data(), 2, 2).counts, (std::vector<uint32_t>{0, 1, 3}));
}

TEST(Rle, IouAndCrowdIou) {
  std::vector<uint8_t> a(16, 0), b(16, 0);
  for (int i = 0; i < 8; ++i) a[size_t(i)] = 1;      // top two rows
  for (int i = 4; i < 16; ++i) b[size_t(i)] = 1;     // bottom three rows
  const Rle ra = rle_encode(a.data(), 4, 4), rb = rle_encode(b.data(), 4, 4);
  EXPECT_DOUBLE_EQ(rle_iou(ra, rb, false), 4.0 / 16.0);
  EXPECT_DOUBLE_EQ(rle_iou(ra, rb, true), 4.0 / 8.0);  // over the detection's area
}

TEST(Rle, StringFormRoundTripsAndRejectsGarbage) {
  std::vector<uint8_t> m(48 * 64, 0);
  for (int y = 5; y < 30; ++y)
    for (int x = 7; x < 50; x += (y % 3) + 1) m[size_t(y) * 64 + x] = 1;
  const Rle r = rle_encode(m.data(), 48, 64);
  const Rle back = rle_from_string(rle_to_string(r), 48, 64);
  EXPECT_EQ(back.counts, r.counts);
  EXPECT_THROW(rle_from_string("0PP3", 48, 65), std::invalid_argument);  // sums to 48*64, not 48*65
  EXPECT_THROW(rle_from_string("0P\x7f", 48, 64), std::invalid_argument);
}

TEST(Rle, PolygonsRasterizeAsPycocotools) {
  struct Case {
    std::vector<std::vector<double>> polys;
    const char* counts;
    uint64_t area;
    std::vector<double> box;
  };
  const std::vector<Case> cases = {
      {{{10.2, 5.7, 30.9, 8.1, 25.3, 28.8, 12.0, 20.4}}, "V?2^18H5K001O10O01O001O1O001O1O01O0M3L4L4M3L\\a1", 310, {10, 6, 21, 22}},
      {{{0, 0, 63.9, 0, 63.9, 47.9, 0, 47.9}}, "0PP3", 3072, {0, 0, 64, 48}},
      {{{5, 5, 20, 5, 20, 25, 12, 12, 5, 25}}, "e7c0m0N2N2N2O1N2N2001O2N2N1O2N1O2iQ2", 201, {5, 5, 15, 19}},
      {{{40.5, 10.5, 60.5, 10.5, 50.5, 40.5}, {2, 30, 10, 30, 6, 45.6}},
       "n32^14L4L4L00L4L4LQ^10SbN3M3M3M3M3M3M3M3M3MN2M3M3M3M3M3M3M3Mh5", 354, {2, 11, 58, 33}},
  };
  for (const Case& c : cases) {
    const Rle r = rle_from_polygons(c.polys, 48, 64);
    EXPECT_EQ(rle_to_string(r), c.counts);
    EXPECT_EQ(rle_area(r), c.area);
    double box[4];
    rle_to_bbox(r, box);
    EXPECT_EQ(std::vector<double>(box, box + 4), c.box);
  }
}
