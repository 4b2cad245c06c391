// Image classification data (the mini ResNet's Fashion-MNIST, or any [N,H,W,C] uint8 split in
// the layout of datasets/README.md): loading a split or a rank's slice of it from HDF5, and
// filling a float NHWC batch with normalisation and per-sample deterministic augmentation.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mlpd {

// The command that builds the mini image dataset; every loader error names it.
inline constexpr const char* kPrepareImageHint = "mlperf-dist prepare --benchmark resnet --scale mini";

struct ImageSplit {
  int64_t count = 0;  // samples held here (the whole split, or the slice load_image_rows read)
  int h = 0, w = 0, c = 0;
  int num_classes = 0;
  float mean = 0.0f;  // per-pixel statistics of the TRAINING set in [0,1] units (eval uses them too)
  float std = 1.0f;
  std::vector<uint8_t> pixels;  // count*h*w*c, NHWC
  std::vector<int32_t> labels;  // count, each in [0, num_classes)
};

// Checks a prepared file without reading its pixels, as a run does before it writes anything:
// it is HDF5 in the layout of datasets/README.md; both splits hold uint8 images [N,H,W,C] and
// int32 labels [N] with one N, stored in full (no header claims more than the file holds), within
// sane bounds and matching their attributes; the eval samples have the training samples' shape;
// num_classes >= 2, the training mean and std are pixel statistics, and every label lies in
// [0, num_classes). UserError (exit code 2) naming the path, the dataset or attribute at fault and
// kPrepareImageHint. HDF5 prints nothing.
void check_image_dataset(const std::string& h5_path);

// Loads a whole split ("train" or "eval") into memory, after the checks of check_image_dataset
// but for the other split's labels, so the split it returns is safe to use with the other one.
// The same errors; UserError for an unknown split name.
ImageSplit load_image_split(const std::string& h5_path, const std::string& split);

// Loads rows [begin, begin+count) of a split with a hyperslab read: the reference-scale path,
// where each rank reads only its own slice. Same errors; UserError when the range is outside.
ImageSplit load_image_rows(const std::string& h5_path, const std::string& split, int64_t begin, int64_t count);

struct AugmentSpec {
  bool enabled = false;  // random crop (if pad > 0) and flip (if flip); off for evaluation
  int pad = 0;           // zero-pad each side by `pad` pixels, then crop back to HxW at a random offset
  bool flip = false;     // horizontal flip with p = 0.5
  float mean = 0.0f;     // normalisation: (pixel/255 - mean) / std
  float std = 1.0f;
};

// Normalises (and, if aug.enabled, augments) samples data[sample_indices[0..n)] into
// out_nhwc [n,h,w,c] and their labels into labels_out (may be null). The random crop offset and
// flip of a sample depend only on (seed, epoch, sample index), so a sample is augmented the same
// whichever rank or micro-batch fills it. Padding is pixel value 0 (black, Fashion-MNIST's
// background), normalised like any other pixel. Allocates nothing. Throws on an index outside
// [0, data.count) (a caller bug).
void fill_image_batch(const ImageSplit& data, const int64_t* sample_indices, int n, const AugmentSpec& aug,
                      uint64_t seed, int epoch, float* out_nhwc, int32_t* labels_out);

}  // namespace mlpd
