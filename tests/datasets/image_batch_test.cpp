// Filling float batches: normalisation, per-sample deterministic augmentation, rank-invariance,
// and the double-buffered prefetcher.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "datasets/image_dataset.h"
#include "datasets/prefetcher.h"
#include "datasets/sampling.h"

using namespace mlpd;

namespace {

// 64 samples of 6x5x2 (non-square, two channels), pixels from a fixed generator.
ImageSplit synthetic(int64_t n = 64, int h = 6, int w = 5, int c = 2) {
  ImageSplit s;
  s.count = n;
  s.h = h;
  s.w = w;
  s.c = c;
  s.num_classes = 10;
  s.mean = 0.3f;
  s.std = 0.4f;
  s.pixels.resize(static_cast<size_t>(n) * h * w * c);
  for (size_t i = 0; i < s.pixels.size(); ++i) s.pixels[i] = static_cast<uint8_t>(1 + rng_below(5, 0, i, 255));
  for (int64_t i = 0; i < n; ++i) s.labels.push_back(static_cast<int32_t>(i % 10));
  return s;
}

AugmentSpec aug_of(const ImageSplit& s, bool enabled, int pad, bool flip) {
  return AugmentSpec{enabled, pad, flip, s.mean, s.std};
}

size_t per_sample(const ImageSplit& s) { return static_cast<size_t>(s.h) * s.w * s.c; }

float norm(const ImageSplit& s, int p) { return (static_cast<float>(p) / 255.0f - s.mean) / s.std; }

}  // namespace

TEST(FillImageBatch, NormalisesAndCopiesLabelsWithoutAugmentation) {
  ImageSplit s = synthetic();
  std::vector<int64_t> idx = {5, 0, 63, 5};
  std::vector<float> x(idx.size() * per_sample(s));
  std::vector<int32_t> y(idx.size(), -1);
  fill_image_batch(s, idx.data(), 4, aug_of(s, false, 2, true), 1, 0, x.data(), y.data());
  for (size_t i = 0; i < idx.size(); ++i) {
    EXPECT_EQ(y[i], s.labels[idx[i]]);
    for (size_t k = 0; k < per_sample(s); ++k)
      ASSERT_FLOAT_EQ(x[i * per_sample(s) + k], norm(s, s.pixels[idx[i] * per_sample(s) + k]));
  }
  EXPECT_THROW(fill_image_batch(s, std::vector<int64_t>{64}.data(), 1, aug_of(s, false, 0, false), 1, 0, x.data(),
                                nullptr),
               std::exception);
}

TEST(FillImageBatch, FlipMirrorsRowsAndHappensAboutHalfTheTime) {
  ImageSplit s = synthetic(200);
  std::vector<int64_t> idx(200);
  for (int i = 0; i < 200; ++i) idx[i] = i;
  std::vector<float> plain(200 * per_sample(s)), aug(200 * per_sample(s));
  fill_image_batch(s, idx.data(), 200, aug_of(s, false, 0, false), 9, 0, plain.data(), nullptr);
  fill_image_batch(s, idx.data(), 200, aug_of(s, true, 0, true), 9, 0, aug.data(), nullptr);
  int flipped = 0;
  const int w = s.w, c = s.c;
  for (int i = 0; i < 200; ++i) {
    const float* p = plain.data() + i * per_sample(s);
    const float* a = aug.data() + i * per_sample(s);
    bool same = std::memcmp(p, a, per_sample(s) * sizeof(float)) == 0;
    bool mirror = true;
    for (int y = 0; y < s.h; ++y)
      for (int x = 0; x < w; ++x)
        for (int k = 0; k < c; ++k) mirror &= a[(y * w + x) * c + k] == p[(y * w + (w - 1 - x)) * c + k];
    ASSERT_TRUE(same || mirror) << "sample " << i << " is neither itself nor its mirror image";
    flipped += !same;
  }
  EXPECT_GT(flipped, 70);
  EXPECT_LT(flipped, 130);
}

TEST(FillImageBatch, CropIsAZeroPaddedShiftWithinPad) {
  ImageSplit s = synthetic(100);
  const int pad = 2, h = s.h, w = s.w, c = s.c;
  std::vector<int64_t> idx(100);
  for (int i = 0; i < 100; ++i) idx[i] = i;
  std::vector<float> aug(100 * per_sample(s));
  fill_image_batch(s, idx.data(), 100, aug_of(s, true, pad, false), 3, 1, aug.data(), nullptr);
  std::set<std::pair<int, int>> shifts;
  for (int i = 0; i < 100; ++i) {
    const float* a = aug.data() + i * per_sample(s);
    const uint8_t* src = s.pixels.data() + i * per_sample(s);
    int matches = 0;
    for (int dy = -pad; dy <= pad; ++dy)
      for (int dx = -pad; dx <= pad; ++dx) {
        bool ok = true;
        for (int y = 0; y < h && ok; ++y)
          for (int x = 0; x < w && ok; ++x)
            for (int k = 0; k < c; ++k) {
              int sy = y + dy, sx = x + dx;
              int p = (sy < 0 || sy >= h || sx < 0 || sx >= w) ? 0 : src[(sy * w + sx) * c + k];
              ok &= a[(y * w + x) * c + k] == norm(s, p);
            }
        if (ok) {
          ++matches;
          shifts.insert({dy, dx});
        }
      }
    ASSERT_EQ(matches, 1) << "sample " << i << " is not exactly one shift of the padded image";
  }
  EXPECT_GT(shifts.size(), 15u) << "the offsets should cover most of the 25 possible shifts";
}

TEST(FillImageBatch, AugmentationIsDeterministicPerSampleAndChangesWithEpochAndSeed) {
  ImageSplit s = synthetic();
  const AugmentSpec aug = aug_of(s, true, 2, true);
  std::vector<int64_t> idx(64);
  for (int i = 0; i < 64; ++i) idx[i] = i;
  const size_t bytes = 64 * per_sample(s) * sizeof(float);
  std::vector<float> a(64 * per_sample(s)), b(a.size()), e1(a.size()), s2(a.size());
  fill_image_batch(s, idx.data(), 64, aug, 11, 4, a.data(), nullptr);
  fill_image_batch(s, idx.data(), 64, aug, 11, 4, b.data(), nullptr);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), bytes), 0);
  fill_image_batch(s, idx.data(), 64, aug, 11, 5, e1.data(), nullptr);
  EXPECT_NE(std::memcmp(a.data(), e1.data(), bytes), 0);
  fill_image_batch(s, idx.data(), 64, aug, 12, 4, s2.data(), nullptr);
  EXPECT_NE(std::memcmp(a.data(), s2.data(), bytes), 0);
  // A sample gets the same augmentation alone, at another position, in another batch.
  int64_t one = 37;
  std::vector<float> single(per_sample(s));
  fill_image_batch(s, &one, 1, aug, 11, 4, single.data(), nullptr);
  EXPECT_EQ(std::memcmp(single.data(), a.data() + 37 * per_sample(s), per_sample(s) * sizeof(float)), 0);
}

TEST(FillImageBatch, UnionOfRankFillsEqualsOneRankFillBitwise) {
  ImageSplit s = synthetic();
  const AugmentSpec aug = aug_of(s, true, 2, true);
  const int64_t global = 12;
  const int epoch = 3;
  std::vector<int64_t> perm;
  epoch_permutation(77, epoch, s.count, perm);
  for (int64_t b = 0; b < batches_per_epoch(s.count, global); ++b) {
    Slice all = rank_slice_of_batch(b, global, 0, 1);
    std::vector<float> x1(global * per_sample(s));
    std::vector<int32_t> y1(global);
    fill_image_batch(s, perm.data() + all.begin, static_cast<int>(all.count), aug, 77, epoch, x1.data(), y1.data());
    for (int ranks : {2, 3, 4}) {
      std::vector<float> xr(global * per_sample(s), -99.0f);
      std::vector<int32_t> yr(global, -1);
      for (int r = 0; r < ranks; ++r) {
        Slice sl = rank_slice_of_batch(b, global, r, ranks);
        // Each rank fills its own buffer; placing them side by side is the union.
        std::vector<float> xl(sl.count * per_sample(s));
        std::vector<int32_t> yl(sl.count);
        fill_image_batch(s, perm.data() + sl.begin, static_cast<int>(sl.count), aug, 77, epoch, xl.data(), yl.data());
        const int64_t off = sl.begin - all.begin;
        std::memcpy(xr.data() + off * per_sample(s), xl.data(), xl.size() * sizeof(float));
        std::memcpy(yr.data() + off, yl.data(), yl.size() * sizeof(int32_t));
      }
      EXPECT_EQ(std::memcmp(x1.data(), xr.data(), x1.size() * sizeof(float)), 0) << "batch " << b << " ranks " << ranks;
      EXPECT_EQ(y1, yr);
    }
  }
}

TEST(BatchPrefetcher, ReturnsTheSameDataAsADirectFill) {
  ImageSplit s = synthetic();
  const AugmentSpec aug = aug_of(s, true, 1, true);
  const int global = 10;
  const int batches = static_cast<int>(batches_per_epoch(s.count, global));
  BatchPrefetcher pf;
  pf.start(&s, aug, 5, global);
  std::vector<float> direct(global * per_sample(s));
  std::vector<int32_t> labels(global);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> perm;
    epoch_permutation(5, epoch, s.count, perm);
    pf.request(epoch, perm.data(), global);
    for (int b = 0; b < batches; ++b) {
      PrefetchedBatch got = pf.wait();
      const float* x = got.x;
      ASSERT_EQ(got.n, global);
      std::vector<float> held(x, x + global * per_sample(s));  // what the caller "trains on"
      if (b + 1 < batches) pf.request(epoch, perm.data() + (b + 1) * global, global);
      fill_image_batch(s, perm.data() + b * global, global, aug, 5, epoch, direct.data(), labels.data());
      EXPECT_EQ(std::memcmp(direct.data(), held.data(), direct.size() * sizeof(float)), 0) << epoch << " " << b;
      // The buffer being trained on is untouched while the next batch fills the other one.
      EXPECT_EQ(std::memcmp(direct.data(), x, direct.size() * sizeof(float)), 0) << epoch << " " << b;
      EXPECT_EQ(std::vector<int32_t>(got.y, got.y + global), labels);
    }
  }
  // A smaller final request works too.
  int64_t tail[3] = {1, 2, 3};
  pf.request(2, tail, 3);
  EXPECT_EQ(pf.wait().n, 3);
}

// The image buffers from a caller's allocator (page-locked memory on a GPU run): batches land in
// that memory, with the same bytes as with the prefetcher's own buffers.
std::vector<std::byte*> g_allocated;
DeviceBytes recording_alloc(size_t bytes) {
  auto* p = static_cast<std::byte*>(std::calloc(bytes, 1));
  g_allocated.push_back(p);
  return DeviceBytes(p, [](std::byte* q) { std::free(q); });
}

TEST(BatchPrefetcher, FillsBuffersFromTheCallersAllocatorAlike) {
  ImageSplit s = synthetic();
  const AugmentSpec aug = aug_of(s, true, 1, true);
  const int global = 10;
  g_allocated.clear();
  BatchPrefetcher own, staged;
  own.start(&s, aug, 5, global);
  staged.start(&s, aug, 5, global, recording_alloc);
  ASSERT_EQ(g_allocated.size(), 2u);
  std::vector<int64_t> perm;
  epoch_permutation(5, 1, s.count, perm);
  for (int b = 0; b < 3; ++b) {
    own.request(1, perm.data() + b * global, global);
    staged.request(1, perm.data() + b * global, global);
    PrefetchedBatch want = own.wait(), got = staged.wait();
    EXPECT_TRUE(reinterpret_cast<std::byte*>(got.x) == g_allocated[0] || reinterpret_cast<std::byte*>(got.x) == g_allocated[1]);
    EXPECT_EQ(std::memcmp(want.x, got.x, global * per_sample(s) * sizeof(float)), 0) << b;
    EXPECT_EQ(std::vector<int32_t>(want.y, want.y + global), std::vector<int32_t>(got.y, got.y + global));
  }
}

TEST(BatchPrefetcher, RejectsMisuseAndPassesFillErrorsToTheCaller) {
  ImageSplit s = synthetic();
  BatchPrefetcher pf;
  int64_t idx[5] = {0, 1, 2, 3, 400};
  EXPECT_THROW(pf.request(0, idx, 2), std::exception);  // not started
  pf.start(&s, aug_of(s, false, 0, false), 1, 4);
  EXPECT_THROW(pf.request(0, idx, 5), std::exception);  // over max_batch
  EXPECT_THROW(pf.wait(), std::exception);              // nothing requested
  pf.request(0, idx, 2);
  EXPECT_THROW(pf.request(0, idx, 2), std::exception);  // one outstanding already
  pf.wait();
  pf.request(0, idx + 1, 4);  // contains the out-of-range index 400
  EXPECT_THROW(pf.wait(), std::exception);
  pf.request(0, idx, 4);  // still usable afterwards
  EXPECT_EQ(pf.wait().n, 4);
}
