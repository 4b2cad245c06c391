// Converter for the mini ResNet data: Fashion-MNIST's gzipped IDX files, as the Debian package
// dataset-fashion-mnist installs them, into the mlperf-dist HDF5 layout (datasets/README.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mlpd {

// Where the Debian package dataset-fashion-mnist puts the four .gz IDX files.
inline constexpr const char* kFashionMnistDebianDir = "/usr/share/datasets/fashion-mnist";

struct PreparedImages {
  int64_t train = 0;  // samples written to /train
  int64_t eval = 0;   // samples written to /eval (the IDX "t10k" test set)
  int h = 0, w = 0, c = 0;
  int num_classes = 0;
  double mean = 0.0, std = 0.0;  // training-set pixel statistics, [0,1] units
};

// Reads {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz from idx_dir (zlib; plain uncompressed
// IDX is read too), validates magic numbers, counts, dimensions and labels, computes the
// training-set mean/std and writes out_h5: first to a temporary file in the same directory
// (created if needed), renamed to out_h5 only when complete. Prints nothing.
// Throws UserError naming the offending file (and the Debian package when a file is missing).
PreparedImages prepare_fashion_mnist(const std::string& idx_dir, const std::string& out_h5);

// One split of the IDX files ("train" or "t10k"), validated as prepare_fashion_mnist does: the
// items the detection scenes are composed from. UserError naming the file on any problem.
struct FashionMnistItems {
  int64_t n = 0;
  int rows = 0, cols = 0;
  std::vector<uint8_t> images;  // [n, rows, cols]
  std::vector<uint8_t> labels;  // [n], 0..9
};
FashionMnistItems read_fashion_mnist(const std::string& idx_dir, const std::string& prefix);
// The ten class names, index order.
std::vector<std::string> fashion_mnist_class_names();

}  // namespace mlpd
