// The Fashion-MNIST converter on small IDX files written here, and the HDF5 loader's errors.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/check.h"
#include "datasets/fashion_mnist.h"
#include "datasets/h5.h"
#include "datasets/image_dataset.h"
#include "temp_dir.h"

using namespace mlpd;
namespace fs = std::filesystem;

namespace {

void put_be32(std::vector<uint8_t>& v, uint32_t x) {
  for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<uint8_t>(x >> s));
}

void write_gz(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

std::vector<uint8_t> idx_images(uint32_t magic, uint32_t n_header, const std::vector<uint8_t>& pixels) {
  std::vector<uint8_t> v;
  put_be32(v, magic);
  put_be32(v, n_header);
  put_be32(v, 4);
  put_be32(v, 4);
  v.insert(v.end(), pixels.begin(), pixels.end());
  return v;
}

std::vector<uint8_t> idx_labels(uint32_t magic, const std::vector<uint8_t>& labels) {
  std::vector<uint8_t> v;
  put_be32(v, magic);
  put_be32(v, static_cast<uint32_t>(labels.size()));
  v.insert(v.end(), labels.begin(), labels.end());
  return v;
}

// 5 train and 3 test images of 4x4, with pixels and labels that identify each sample.
struct SmallSet {
  std::vector<uint8_t> train_px, test_px, train_lb{3, 0, 9, 1, 3}, test_lb{7, 2, 0};
  SmallSet() {
    for (int i = 0; i < 5 * 16; ++i) train_px.push_back(static_cast<uint8_t>((i * 37 + 11) % 256));
    for (int i = 0; i < 3 * 16; ++i) test_px.push_back(static_cast<uint8_t>((i * 53 + 200) % 256));
    train_px[0] = 0;
    train_px[1] = 255;
  }
  void write(const TempDir& d) const {
    write_gz(d / "train-images-idx3-ubyte.gz", idx_images(0x803, 5, train_px));
    write_gz(d / "train-labels-idx1-ubyte.gz", idx_labels(0x801, train_lb));
    write_gz(d / "t10k-images-idx3-ubyte.gz", idx_images(0x803, 3, test_px));
    write_gz(d / "t10k-labels-idx1-ubyte.gz", idx_labels(0x801, test_lb));
  }
};

// Runs f, expects a UserError, returns its message.
template <class F>
std::string user_error_of(F f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected UserError, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected UserError, nothing thrown";
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(PrepareFashionMnist, RoundTripsCountsPixelsAndLabelsThroughHdf5) {
  TempDir in, out;
  SmallSet s;
  s.write(in);
  const std::string h5 = out / "nested/dir/fashion_mnist.h5";  // the directory does not exist yet
  PreparedImages r = prepare_fashion_mnist(in.path.string(), h5);
  EXPECT_EQ(r.train, 5);
  EXPECT_EQ(r.eval, 3);
  EXPECT_EQ(r.h, 4);
  EXPECT_EQ(r.w, 4);
  EXPECT_EQ(r.c, 1);
  EXPECT_EQ(r.num_classes, 10);

  double sum = 0, sumsq = 0;
  for (uint8_t p : s.train_px) {
    sum += p / 255.0;
    sumsq += (p / 255.0) * (p / 255.0);
  }
  const double mean = sum / 80, sd = std::sqrt(sumsq / 80 - mean * mean);
  EXPECT_NEAR(r.mean, mean, 1e-12);
  EXPECT_NEAR(r.std, sd, 1e-12);

  ImageSplit train = load_image_split(h5, "train");
  EXPECT_EQ(train.count, 5);
  EXPECT_EQ(train.h, 4);
  EXPECT_EQ(train.w, 4);
  EXPECT_EQ(train.c, 1);
  EXPECT_EQ(train.num_classes, 10);
  EXPECT_EQ(train.pixels, s.train_px);
  EXPECT_EQ(train.labels, std::vector<int32_t>(s.train_lb.begin(), s.train_lb.end()));
  EXPECT_FLOAT_EQ(train.mean, static_cast<float>(mean));
  EXPECT_FLOAT_EQ(train.std, static_cast<float>(sd));

  ImageSplit eval = load_image_split(h5, "eval");
  EXPECT_EQ(eval.count, 3);
  EXPECT_EQ(eval.pixels, s.test_px);
  EXPECT_EQ(eval.labels, std::vector<int32_t>(s.test_lb.begin(), s.test_lb.end()));
  EXPECT_EQ(eval.mean, train.mean) << "eval is normalised with the training statistics";
  EXPECT_EQ(eval.std, train.std);

  // Only the final file is left: the temporary was renamed.
  std::vector<std::string> names;
  for (auto& e : fs::directory_iterator(fs::path(h5).parent_path())) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"fashion_mnist.h5"});

  // Preparing again replaces the file.
  EXPECT_NO_THROW(prepare_fashion_mnist(in.path.string(), h5));
  EXPECT_EQ(load_image_split(h5, "train").pixels, s.train_px);
}

TEST(PrepareFashionMnist, FileHasTheDocumentedAttributes) {
  TempDir in, out;
  SmallSet().write(in);
  const std::string h5 = out / "f.h5";
  prepare_fashion_mnist(in.path.string(), h5);
  H5Quiet quiet;
  H5Id f(H5_CHECK(H5Fopen(h5.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  EXPECT_EQ(h5_read_attr_str(f, "format"), "mlperf-dist-hdf5");
  EXPECT_EQ(h5_read_attr_i64(f, "format_version"), 1);
  EXPECT_EQ(h5_read_attr_str(f, "benchmark"), "resnet");
  EXPECT_EQ(h5_read_attr_str(f, "scale"), "mini");
  EXPECT_EQ(h5_read_attr_i64(f, "num_classes"), 10);
  EXPECT_TRUE(contains(h5_read_attr_str(f, "source"), "dataset-fashion-mnist"));
  EXPECT_TRUE(contains(h5_read_attr_str(f, "licence"), "MIT"));
  H5Id g(H5_CHECK(H5Gopen2(f, "/eval", H5P_DEFAULT)));
  EXPECT_EQ(h5_read_attr_i64(g, "count"), 3);
  EXPECT_EQ(h5_read_attr_i64(g, "height"), 4);
  H5Id d(H5_CHECK(H5Dopen2(f, "/train/images", H5P_DEFAULT)));
  H5Id dcpl(H5_CHECK(H5Dget_create_plist(d)));
  EXPECT_EQ(H5Pget_layout(dcpl), H5D_CHUNKED);
}

TEST(LoadImageRows, ReadsOnlyTheRequestedSlice) {
  TempDir in, out;
  SmallSet s;
  s.write(in);
  const std::string h5 = out / "f.h5";
  prepare_fashion_mnist(in.path.string(), h5);
  ImageSplit part = load_image_rows(h5, "train", 1, 3);
  EXPECT_EQ(part.count, 3);
  EXPECT_EQ(part.pixels, std::vector<uint8_t>(s.train_px.begin() + 16, s.train_px.begin() + 64));
  EXPECT_EQ(part.labels, (std::vector<int32_t>{0, 9, 1}));
  EXPECT_EQ(load_image_rows(h5, "eval", 3, 0).count, 0);
  EXPECT_TRUE(contains(user_error_of([&] { load_image_rows(h5, "train", 3, 3); }), "outside"));
  EXPECT_TRUE(contains(user_error_of([&] { load_image_rows(h5, "train", -1, 1); }), "outside"));
  EXPECT_TRUE(contains(user_error_of([&] { load_image_split(h5, "test"); }), "unknown dataset split"));
}

TEST(PrepareFashionMnist, WrongMagicNumberNamesTheFile) {
  TempDir in, out;
  SmallSet s;
  s.write(in);
  write_gz(in / "train-labels-idx1-ubyte.gz", idx_labels(0x803, s.train_lb));
  const std::string h5 = out / "f.h5";
  std::string msg = user_error_of([&] { prepare_fashion_mnist(in.path.string(), h5); });
  EXPECT_TRUE(contains(msg, "train-labels-idx1-ubyte.gz")) << msg;
  EXPECT_TRUE(contains(msg, "magic")) << msg;
  EXPECT_FALSE(fs::exists(h5));
}

TEST(PrepareFashionMnist, TruncatedGzipNamesTheFile) {
  TempDir in, out;
  SmallSet s;
  s.write(in);
  const std::string img = in / "t10k-images-idx3-ubyte.gz";
  fs::resize_file(img, fs::file_size(img) / 2);
  const std::string h5 = out / "f.h5";
  std::string msg = user_error_of([&] { prepare_fashion_mnist(in.path.string(), h5); });
  EXPECT_TRUE(contains(msg, "t10k-images-idx3-ubyte.gz")) << msg;
  EXPECT_TRUE(contains(msg, "truncated")) << msg;
  EXPECT_FALSE(fs::exists(h5));
}

TEST(PrepareFashionMnist, HeaderCountBeyondTheDataIsTruncation) {
  TempDir in, out;
  SmallSet s;
  s.write(in);
  write_gz(in / "train-images-idx3-ubyte.gz", idx_images(0x803, 6, s.train_px));  // says 6, holds 5
  std::string msg = user_error_of([&] { prepare_fashion_mnist(in.path.string(), out / "f.h5"); });
  EXPECT_TRUE(contains(msg, "train-images-idx3-ubyte.gz")) << msg;
  EXPECT_TRUE(contains(msg, "truncated")) << msg;
}

TEST(PrepareFashionMnist, MismatchedCountsAndBadLabelsNameTheFile) {
  TempDir in, out;
  SmallSet s;
  s.write(in);
  write_gz(in / "t10k-labels-idx1-ubyte.gz", idx_labels(0x801, {1, 2}));
  std::string msg = user_error_of([&] { prepare_fashion_mnist(in.path.string(), out / "f.h5"); });
  EXPECT_TRUE(contains(msg, "t10k-labels-idx1-ubyte.gz")) << msg;
  write_gz(in / "t10k-labels-idx1-ubyte.gz", idx_labels(0x801, {1, 2, 10}));
  msg = user_error_of([&] { prepare_fashion_mnist(in.path.string(), out / "f.h5"); });
  EXPECT_TRUE(contains(msg, "t10k-labels-idx1-ubyte.gz")) << msg;
  EXPECT_TRUE(contains(msg, "label 10")) << msg;
}

TEST(PrepareFashionMnist, MissingFileNamesTheDebianPackage) {
  TempDir in, out;
  SmallSet().write(in);
  fs::remove(in / "t10k-labels-idx1-ubyte.gz");
  std::string msg = user_error_of([&] { prepare_fashion_mnist(in.path.string(), out / "f.h5"); });
  EXPECT_TRUE(contains(msg, "t10k-labels-idx1-ubyte.gz")) << msg;
  EXPECT_TRUE(contains(msg, "dataset-fashion-mnist")) << msg;
}

TEST(LoadImageSplit, MissingFileTellsHowToPrepare) {
  TempDir d;
  const std::string h5 = d / "absent.h5";
  std::string msg = user_error_of([&] { load_image_split(h5, "train"); });
  EXPECT_TRUE(contains(msg, "mlperf-dist prepare")) << msg;
  EXPECT_TRUE(contains(msg, h5)) << msg;
}

TEST(LoadImageSplit, RandomBytesFileTellsHowToPrepareAndHdf5PrintsNothing) {
  TempDir d;
  const std::string h5 = d / "random.h5";
  {
    std::ofstream f(h5, std::ios::binary);
    for (int i = 0; i < 4096; ++i) f.put(static_cast<char>((i * 7919 + 13) & 0xff));
  }
  testing::internal::CaptureStderr();
  std::string msg = user_error_of([&] { load_image_split(h5, "train"); });
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(msg, "mlperf-dist prepare")) << msg;
  EXPECT_TRUE(contains(msg, h5)) << msg;
  EXPECT_EQ(err, "");
}

TEST(LoadImageSplit, HdfFileWithoutTrainTellsHowToPrepare) {
  TempDir d;
  const std::string h5 = d / "other.h5";
  {
    H5Id f(H5_CHECK(H5Fcreate(h5.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)));
    H5Id g(H5_CHECK(H5Gcreate2(f, "/something_else", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  }
  testing::internal::CaptureStderr();
  std::string msg = user_error_of([&] { load_image_split(h5, "eval"); });
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_TRUE(contains(msg, "mlperf-dist prepare")) << msg;
  EXPECT_TRUE(contains(msg, "/train")) << msg;
}

TEST(LoadImageSplit, TruncatedOrIncompleteFileTellsHowToPrepare) {
  TempDir in, out;
  SmallSet().write(in);
  const std::string h5 = out / "f.h5";
  prepare_fashion_mnist(in.path.string(), h5);

  const std::string cut = out / "cut.h5";
  fs::copy_file(h5, cut);
  fs::resize_file(cut, fs::file_size(cut) / 2);
  testing::internal::CaptureStderr();
  std::string msg = user_error_of([&] { load_image_split(cut, "train"); });
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_TRUE(contains(msg, "mlperf-dist prepare")) << msg;
  EXPECT_TRUE(contains(msg, cut)) << msg;

  const std::string no_mean = out / "no_mean.h5";
  fs::copy_file(h5, no_mean);
  {
    H5Id f(H5_CHECK(H5Fopen(no_mean.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)));
    H5Id g(H5_CHECK(H5Gopen2(f, "/train", H5P_DEFAULT)));
    H5_CHECK(H5Adelete(g, "mean"));
  }
  msg = user_error_of([&] { load_image_split(no_mean, "eval"); });
  EXPECT_TRUE(contains(msg, "mlperf-dist prepare")) << msg;
  EXPECT_TRUE(contains(msg, "mean")) << msg;

  const std::string no_labels = out / "no_labels.h5";
  fs::copy_file(h5, no_labels);
  {
    H5Id f(H5_CHECK(H5Fopen(no_labels.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)));
    H5_CHECK(H5Ldelete(f, "/eval/labels", H5P_DEFAULT));
  }
  msg = user_error_of([&] { load_image_split(no_labels, "eval"); });
  EXPECT_TRUE(contains(msg, "mlperf-dist prepare")) << msg;
  EXPECT_TRUE(contains(msg, "/eval/labels")) << msg;
}

TEST(H5Check, NamesFileLineAndTheFailedCall) {
  H5Quiet quiet;
  try {
    H5_CHECK(H5Fopen("/nonexistent/dir/x.h5", H5F_ACC_RDONLY, H5P_DEFAULT));
    FAIL() << "no exception";
  } catch (const H5Error& e) {
    std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "prepare_load_test.cpp:")) << msg;
    EXPECT_TRUE(contains(msg, "H5Fopen(\"/nonexistent/dir/x.h5\"")) << msg;
    EXPECT_TRUE(contains(msg, "failed")) << msg;
  }
}
