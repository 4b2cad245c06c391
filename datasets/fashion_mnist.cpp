#include "datasets/fashion_mnist.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/check.h"
#include "datasets/h5.h"
#include "datasets/layout.h"

namespace mlpd {

namespace {

namespace fs = std::filesystem;

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned byte, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned byte, 1 dimension
constexpr int kNumClasses = 10;
constexpr const char* kClassNames = "T-shirt/top,Trouser,Pullover,Dress,Coat,Sandal,Shirt,Sneaker,Bag,Ankle boot";
constexpr const char* kInstallHint =
    "install the Debian package dataset-fashion-mnist (apt-get install dataset-fashion-mnist), which puts the "
    "files in /usr/share/datasets/fashion-mnist";

struct GzFile {
  gzFile f = nullptr;
  ~GzFile() {
    if (f) gzclose(f);
  }
};

// Reads exactly `n` bytes or throws naming the file: truncated or corrupt gzip data.
void read_exact(gzFile f, const std::string& path, uint8_t* out, size_t n, const char* what) {
  size_t got = 0;
  while (got < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - got, size_t{1} << 30));
    const int r = gzread(f, out + got, chunk);
    if (r < 0) {
      int code = 0;
      const char* msg = gzerror(f, &code);
      throw UserError(path + ": corrupt or truncated gzip data while reading the " + what + " (" +
                      (msg ? msg : "zlib error") + ")");
    }
    if (r == 0)
      throw UserError(path + ": truncated: the " + what + " need " + std::to_string(n) + " bytes, the file ends after " +
                      std::to_string(got));
    got += static_cast<size_t>(r);
  }
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

struct Idx {
  int64_t n = 0;
  int rows = 0, cols = 0;
  std::vector<uint8_t> data;
};

// One IDX file: images (magic 0x803, [n, rows, cols]) or labels (magic 0x801, [n]).
Idx read_idx(const std::string& path, bool images) {
  GzFile gz;
  gz.f = gzopen(path.c_str(), "rb");
  if (!gz.f) {
    std::error_code ec;
    if (!fs::exists(path, ec)) throw UserError(path + ": file not found; " + kInstallHint);
    throw UserError(path + ": cannot open (" + std::strerror(errno) + ")");
  }
  gzbuffer(gz.f, 1 << 18);
  const uint32_t want = images ? kImagesMagic : kLabelsMagic;
  uint8_t head[16];
  read_exact(gz.f, path, head, 4, "IDX header");
  const uint32_t magic = be32(head);
  if (magic != want) {
    char buf[160];
    std::snprintf(buf, sizeof buf, ": wrong magic number 0x%08x, expected 0x%08x (an IDX %s file)", magic, want,
                  images ? "image" : "label");
    throw UserError(path + buf);
  }
  const size_t dims = images ? 3 : 1;
  read_exact(gz.f, path, head + 4, 4 * dims, "IDX header");
  Idx idx;
  idx.n = be32(head + 4);
  idx.rows = images ? static_cast<int>(be32(head + 8)) : 1;
  idx.cols = images ? static_cast<int>(be32(head + 12)) : 1;
  if (idx.n < 1 || idx.n > 100'000'000)
    throw UserError(path + ": implausible sample count " + std::to_string(idx.n) + " in the IDX header");
  if (idx.rows < 1 || idx.rows > 4096 || idx.cols < 1 || idx.cols > 4096)
    throw UserError(path + ": implausible image size " + std::to_string(idx.rows) + "x" + std::to_string(idx.cols) +
                    " in the IDX header");
  idx.data.resize(static_cast<size_t>(idx.n) * idx.rows * idx.cols);
  read_exact(gz.f, path, idx.data.data(), idx.data.size(), images ? "images" : "labels");
  uint8_t extra = 0;
  const int r = gzread(gz.f, &extra, 1);
  if (r != 0)
    throw UserError(path + (r > 0 ? ": has more data than the " + std::to_string(idx.n) + " samples its header declares"
                                  : std::string(": corrupt gzip data after the samples")));
  return idx;
}

struct Split {
  Idx images, labels;
  std::string image_file, label_file;
};

Split read_split(const std::string& dir, const std::string& prefix) {
  Split s;
  s.image_file = prefix + "-images-idx3-ubyte.gz";
  s.label_file = prefix + "-labels-idx1-ubyte.gz";
  const std::string ipath = (fs::path(dir) / s.image_file).string();
  const std::string lpath = (fs::path(dir) / s.label_file).string();
  s.images = read_idx(ipath, true);
  s.labels = read_idx(lpath, false);
  if (s.images.n != s.labels.n)
    throw UserError(lpath + ": has " + std::to_string(s.labels.n) + " labels but " + ipath + " has " +
                    std::to_string(s.images.n) + " images");
  for (size_t i = 0; i < s.labels.data.size(); ++i)
    if (s.labels.data[i] >= kNumClasses)
      throw UserError(lpath + ": label " + std::to_string(s.labels.data[i]) + " at index " + std::to_string(i) +
                      " is outside 0.." + std::to_string(kNumClasses - 1));
  return s;
}

void write_split(hid_t file, const char* name, const Split& s, const double* mean_std) {
  const auto n = static_cast<hsize_t>(s.images.n);
  const auto h = static_cast<hsize_t>(s.images.rows), w = static_cast<hsize_t>(s.images.cols);
  H5Id group(H5_CHECK(H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));

  // Images: chunks of ~1 MiB along N, so a rank reading its slice touches only its chunks.
  const hsize_t dims[4] = {n, h, w, 1};
  const hsize_t rows_per_chunk = std::max<hsize_t>(1, (hsize_t{1} << 20) / (h * w));
  const hsize_t chunk[4] = {std::min(n, rows_per_chunk), h, w, 1};
  H5Id space(H5_CHECK(H5Screate_simple(4, dims, nullptr)));
  H5Id dcpl(H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
  H5_CHECK(H5Pset_chunk(dcpl, 4, chunk));
  H5Id images(H5_CHECK(H5Dcreate2(group, layout::kImages, H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT)));
  H5_CHECK(H5Dwrite(images, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, s.images.data.data()));

  std::vector<int32_t> labels(s.labels.data.begin(), s.labels.data.end());
  const hsize_t ldims[1] = {n};
  H5Id lspace(H5_CHECK(H5Screate_simple(1, ldims, nullptr)));
  H5Id ds(H5_CHECK(H5Dcreate2(group, layout::kLabels, H5T_STD_I32LE, lspace, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  H5_CHECK(H5Dwrite(ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels.data()));

  h5_write_attr_i64(group, layout::kAttrCount, s.images.n);
  h5_write_attr_i64(group, layout::kAttrHeight, s.images.rows);
  h5_write_attr_i64(group, layout::kAttrWidth, s.images.cols);
  h5_write_attr_i64(group, layout::kAttrChannels, 1);
  h5_write_attr_str(group, layout::kAttrSourceFiles, s.image_file + "," + s.label_file);
  if (mean_std) {
    h5_write_attr_f64(group, layout::kAttrMean, mean_std[0]);
    h5_write_attr_f64(group, layout::kAttrStd, mean_std[1]);
  }
}

void write_file(const std::string& path, const std::string& idx_dir, const Split& train, const Split& eval,
                const double* mean_std) {
  H5Id file(H5_CHECK(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)));
  h5_write_attr_str(file, layout::kAttrFormat, layout::kFormatName);
  h5_write_attr_i64(file, layout::kAttrFormatVersion, layout::kFormatVersion);
  h5_write_attr_str(file, layout::kAttrBenchmark, "resnet");
  h5_write_attr_str(file, layout::kAttrScale, "mini");
  h5_write_attr_i64(file, layout::kAttrNumClasses, kNumClasses);
  h5_write_attr_str(file, layout::kAttrClassNames, kClassNames);
  h5_write_attr_str(file, layout::kAttrSource,
                    "Fashion-MNIST (Zalando Research, https://github.com/zalandoresearch/fashion-mnist), gzipped IDX "
                    "files from the Debian package dataset-fashion-mnist, read from " +
                        idx_dir + "; /eval is the IDX t10k test set");
  h5_write_attr_str(file, layout::kAttrLicence, "MIT (Expat), Copyright 2017 Zalando SE");
  h5_write_attr_str(file, layout::kAttrCreatedBy, "mlperf-dist prepare --benchmark resnet --scale mini");
  write_split(file, layout::kTrain, train, mean_std);
  write_split(file, layout::kEval, eval, nullptr);
  file.close();  // flushes; a failure here must not leave a file that looks complete
}

}  // namespace

FashionMnistItems read_fashion_mnist(const std::string& idx_dir, const std::string& prefix) {
  Split s = read_split(idx_dir, prefix);
  FashionMnistItems items;
  items.n = s.images.n;
  items.rows = s.images.rows;
  items.cols = s.images.cols;
  items.images = std::move(s.images.data);
  items.labels = std::move(s.labels.data);
  return items;
}

std::vector<std::string> fashion_mnist_class_names() {
  std::vector<std::string> names;
  std::string all = kClassNames;
  size_t pos = 0;
  while (pos <= all.size()) {
    const size_t comma = std::min(all.find(',', pos), all.size());
    names.push_back(all.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return names;
}

PreparedImages prepare_fashion_mnist(const std::string& idx_dir, const std::string& out_h5) {
  // Name every missing input at once before reading anything.
  std::string missing;
  for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                        "t10k-labels-idx1-ubyte.gz"}) {
    std::error_code ec;
    const fs::path p = fs::path(idx_dir) / f;
    if (!fs::exists(p, ec)) missing += (missing.empty() ? "" : ", ") + p.string();
  }
  if (!missing.empty()) throw UserError("Fashion-MNIST file(s) not found: " + missing + "; " + kInstallHint);

  const Split train = read_split(idx_dir, "train");
  const Split eval = read_split(idx_dir, "t10k");
  if (eval.images.rows != train.images.rows || eval.images.cols != train.images.cols)
    throw UserError(idx_dir + ": t10k images are " + std::to_string(eval.images.rows) + "x" +
                    std::to_string(eval.images.cols) + " but train images are " + std::to_string(train.images.rows) +
                    "x" + std::to_string(train.images.cols));

  // Training-set statistics from a histogram: exact and independent of summation order.
  uint64_t hist[256] = {};
  for (uint8_t p : train.images.data) ++hist[p];
  double sum = 0, sumsq = 0;
  for (int v = 0; v < 256; ++v) {
    const double x = v / 255.0;
    sum += hist[v] * x;
    sumsq += hist[v] * x * x;
  }
  const double total = static_cast<double>(train.images.data.size());
  const double mean = sum / total;
  const double var = std::max(0.0, sumsq / total - mean * mean);
  double mean_std[2] = {mean, var > 0 ? std::sqrt(var) : 1.0};

  write_h5_atomically(out_h5, [&](const std::string& tmp) { write_file(tmp, idx_dir, train, eval, mean_std); });

  PreparedImages r;
  r.train = train.images.n;
  r.eval = eval.images.n;
  r.h = train.images.rows;
  r.w = train.images.cols;
  r.c = 1;
  r.num_classes = kNumClasses;
  r.mean = mean_std[0];
  r.std = mean_std[1];
  return r;
}

}  // namespace mlpd
