// The converter and loader on the real Fashion-MNIST files of the Debian package
// dataset-fashion-mnist (launch/install-deps installs it). Takes a few seconds.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "datasets/fashion_mnist.h"
#include "datasets/image_dataset.h"

using namespace mlpd;
namespace fs = std::filesystem;

TEST(FashionMnistReal, PreparesSixtyThousandTrainAndTenThousandEvalBalancedImages) {
  // launch/install-deps installs the package: its absence is a broken set-up, not a reason to skip.
  ASSERT_TRUE(fs::exists(fs::path(kFashionMnistDebianDir) / "train-images-idx3-ubyte.gz"))
      << "Debian package dataset-fashion-mnist not installed: run launch/install-deps";
  const fs::path dir = fs::temp_directory_path() / ("mlpd_fmnist_real_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string h5 = (dir / "mini" / "fashion_mnist.h5").string();

  auto t0 = std::chrono::steady_clock::now();
  PreparedImages r = prepare_fashion_mnist(kFashionMnistDebianDir, h5);
  auto t1 = std::chrono::steady_clock::now();
  EXPECT_EQ(r.train, 60000);
  EXPECT_EQ(r.eval, 10000);
  EXPECT_EQ(r.h, 28);
  EXPECT_EQ(r.w, 28);
  EXPECT_EQ(r.c, 1);
  EXPECT_EQ(r.num_classes, 10);
  EXPECT_NEAR(r.mean, 0.2860, 0.001);  // the published Fashion-MNIST statistics
  EXPECT_NEAR(r.std, 0.3530, 0.001);

  ImageSplit train = load_image_split(h5, "train");
  auto t2 = std::chrono::steady_clock::now();
  ImageSplit eval = load_image_split(h5, "eval");
  EXPECT_EQ(train.count, 60000);
  EXPECT_EQ(eval.count, 10000);
  EXPECT_EQ(train.h, 28);
  EXPECT_EQ(train.w, 28);
  EXPECT_EQ(train.c, 1);
  EXPECT_EQ(train.num_classes, 10);
  EXPECT_EQ(train.pixels.size(), size_t{60000} * 784);
  EXPECT_FLOAT_EQ(train.mean, static_cast<float>(r.mean));
  std::vector<int> train_hist(10, 0), eval_hist(10, 0);
  for (int32_t l : train.labels) {
    ASSERT_GE(l, 0);
    ASSERT_LT(l, 10);
    ++train_hist[l];
  }
  for (int32_t l : eval.labels) {
    ASSERT_GE(l, 0);
    ASSERT_LT(l, 10);
    ++eval_hist[l];
  }
  EXPECT_EQ(train_hist, std::vector<int>(10, 6000));
  EXPECT_EQ(eval_hist, std::vector<int>(10, 1000));

  // A rank's slice read by hyperslab equals the same rows of the whole split.
  ImageSplit slice = load_image_rows(h5, "train", 12345, 2000);
  ASSERT_EQ(slice.count, 2000);
  EXPECT_EQ(std::memcmp(slice.pixels.data(), train.pixels.data() + size_t{12345} * 784, size_t{2000} * 784), 0);
  EXPECT_TRUE(std::equal(slice.labels.begin(), slice.labels.end(), train.labels.begin() + 12345));

  using ms = std::chrono::duration<double, std::milli>;
  RecordProperty("prepare_ms", static_cast<int>(ms(t1 - t0).count()));
  RecordProperty("load_train_ms", static_cast<int>(ms(t2 - t1).count()));
  std::printf("[ timing   ] prepare %.0f ms, load train split %.0f ms\n", ms(t1 - t0).count(), ms(t2 - t1).count());
  fs::remove_all(dir);
}
