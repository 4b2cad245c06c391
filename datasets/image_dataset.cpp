#include "datasets/image_dataset.h"

#include <utility>

#include "core/check.h"
#include "core/rng.h"
#include "datasets/h5.h"
#include "datasets/layout.h"
#include "datasets/sampling.h"

namespace mlpd {

namespace {

// Bounds of what a prepared image file may declare, far above any dataset we train on (ImageNet:
// 1.28M samples of at most a few hundred pixels a side, 3 channels): beyond them a header is
// corrupt or crafted, and believing it would mean absurd allocations.
constexpr hsize_t kMaxSamples = INT32_MAX;
constexpr hsize_t kMaxSide = 4096;  // height and width
constexpr hsize_t kMaxChannels = 4;  // gray, RGB, RGBA
constexpr int64_t kMaxClasses = 1 << 20;

[[noreturn]] void bad_file(const std::string& path, const std::string& why) {
  throw UserError("dataset " + path + ": " + why + "; run `" + kPrepareImageHint + "` to (re)build it", 2);
}

void check_split_name(const std::string& split) {
  if (split != "train" && split != "eval")
    throw UserError("unknown dataset split '" + split + "' (expected \"train\" or \"eval\")");
}

std::string dataset_name(const std::string& split, const char* dataset) { return "/" + split + "/" + dataset; }

struct SplitShape {
  int64_t n = 0;
  int h = 0, w = 0, c = 0;
  bool same_sample_shape(const SplitShape& o) const { return h == o.h && w == o.w && c == o.c; }
  std::string sample_text() const { return std::to_string(h) + "x" + std::to_string(w) + "x" + std::to_string(c); }
};

// Everything of a prepared file but its pixels and label values, checked.
struct ImageFileInfo {
  int num_classes = 0;
  double mean = 0.0, std = 1.0;
  SplitShape train, eval;
};

// One split: uint8 images [N,H,W,C] and int32 labels [N] that the file really holds, sizes within
// bounds, and the split's count/height/width/channels attributes equal to those extents.
SplitShape inspect_split(hid_t file, const std::string& path, const std::string& split) {
  const std::string images_name = dataset_name(split, layout::kImages);
  const std::string labels_name = dataset_name(split, layout::kLabels);
  const std::vector<hsize_t> images = h5_int_dataset_extents(file, images_name, 1, false, 4);
  const std::vector<hsize_t> labels = h5_int_dataset_extents(file, labels_name, 4, true, 1);
  if (images[0] != labels[0])
    bad_file(path, images_name + " has " + std::to_string(images[0]) + " images but " + labels_name + " has " +
                       std::to_string(labels[0]) + " labels");
  const hsize_t bounds[4] = {kMaxSamples, kMaxSide, kMaxSide, kMaxChannels};
  for (int d = 0; d < 4; ++d)
    if (images[d] > bounds[d] || (d > 0 && images[d] < 1))
      bad_file(path, images_name + " dimension " + std::to_string(d) + " is " + std::to_string(images[d]) +
                         ", outside [" + (d > 0 ? "1" : "0") + ", " + std::to_string(bounds[d]) + "]");
  // Readers of the layout may trust these attributes, so they must say what the datasets hold.
  H5Id group(H5_CHECK(H5Gopen2(file, ("/" + split).c_str(), H5P_DEFAULT)));
  const std::pair<const char*, hsize_t> attrs[] = {{layout::kAttrCount, images[0]},
                                                   {layout::kAttrHeight, images[1]},
                                                   {layout::kAttrWidth, images[2]},
                                                   {layout::kAttrChannels, images[3]}};
  for (const auto& [name, extent] : attrs) {
    const int64_t v = h5_read_attr_i64(group, name);
    if (v < 0 || static_cast<hsize_t>(v) != extent)
      bad_file(path, "/" + split + " attribute " + name + " is " + std::to_string(v) + " but " + images_name +
                         " holds " + std::to_string(extent));
  }
  return {static_cast<int64_t>(images[0]), static_cast<int>(images[1]), static_cast<int>(images[2]),
          static_cast<int>(images[3])};
}

ImageFileInfo inspect_file(hid_t file, const std::string& path) {
  ImageFileInfo f;
  f.train = inspect_split(file, path, layout::kTrain);
  f.eval = inspect_split(file, path, layout::kEval);
  // The model, its arena and the evaluation buffers are sized for the training samples.
  if (!f.eval.same_sample_shape(f.train))
    bad_file(path, dataset_name(layout::kEval, layout::kImages) + " samples are " + f.eval.sample_text() + " but " +
                       dataset_name(layout::kTrain, layout::kImages) + " samples are " + f.train.sample_text() +
                       "; both splits must have one sample shape");

  h5_check_layout_format(file);
  f.num_classes = static_cast<int>(h5_read_attr_i64_within(file, layout::kAttrNumClasses, 2, kMaxClasses));

  H5Id train(H5_CHECK(H5Gopen2(file, "/train", H5P_DEFAULT)));
  f.mean = h5_read_attr_f64(train, layout::kAttrMean);
  f.std = h5_read_attr_f64(train, layout::kAttrStd);
  // Pixel statistics in [0,1] units: the mean lies in [0, 1] and the deviation in (0, 1].
  if (!(f.mean >= 0.0 && f.mean <= 1.0) || !(f.std > 0.0 && f.std <= 1.0))
    bad_file(path, "/train attributes mean " + std::to_string(f.mean) + " and std " + std::to_string(f.std) +
                       " are not pixel statistics (mean in [0, 1], std in (0, 1])");
  return f;
}

// Rows [begin, begin+count) of dataset `name`, converted to mem_type, into out (which has room
// for count whole rows). The caller has checked the range against the dataset's extents.
void read_rows(hid_t file, const std::string& name, int64_t begin, int64_t count, hid_t mem_type, void* out) {
  if (count == 0) return;
  H5Id ds(H5_CHECK(H5Dopen2(file, name.c_str(), H5P_DEFAULT)));
  H5Id fspace(H5_CHECK(H5Dget_space(ds)));
  const int rank = H5_CHECK(H5Sget_simple_extent_ndims(fspace));
  std::vector<hsize_t> start(static_cast<size_t>(rank), 0), extent(static_cast<size_t>(rank), 0);
  H5_CHECK(H5Sget_simple_extent_dims(fspace, extent.data(), nullptr));
  start[0] = static_cast<hsize_t>(begin);
  extent[0] = static_cast<hsize_t>(count);
  H5_CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), nullptr, extent.data(), nullptr));
  H5Id mspace(H5_CHECK(H5Screate_simple(rank, extent.data(), nullptr)));
  H5_CHECK(H5Dread(ds, mem_type, mspace, fspace, H5P_DEFAULT, out));
}

// A label outside [0, classes) would index past the logits.
void check_labels(const std::string& path, const std::string& split, const std::vector<int32_t>& labels,
                  int64_t first_row, int classes) {
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] < 0 || labels[i] >= classes)
      bad_file(path, dataset_name(split, layout::kLabels) + " holds label " + std::to_string(labels[i]) +
                         " at row " + std::to_string(first_row + static_cast<int64_t>(i)) + ", outside [0, " +
                         std::to_string(classes) + ")");
}

// Runs read(file) on the opened file with HDF5 quiet; every HDF5 failure becomes a UserError
// naming the file and the prepare command.
template <class Read>
auto with_image_file(const std::string& path, Read read) {
  H5Quiet quiet;
  try {
    H5Id file = h5_open_prepared(path);
    return read(file.get());
  } catch (const H5LayoutError& e) {
    bad_file(path, e.what());
  } catch (const H5Error& e) {
    bad_file(path, std::string("cannot be read (corrupt or truncated?): ") + e.what());
  }
}

ImageSplit load_rows(const std::string& path, const std::string& split, int64_t begin, int64_t count, bool whole) {
  check_split_name(split);
  return with_image_file(path, [&](hid_t file) {
    const ImageFileInfo info = inspect_file(file, path);
    const SplitShape& s = split == layout::kTrain ? info.train : info.eval;
    if (whole) {
      begin = 0;
      count = s.n;
    }
    if (begin < 0 || count < 0 || begin > s.n || count > s.n - begin)
      // Named by begin and count: begin + count may overflow.
      throw UserError("dataset " + path + ": " + std::to_string(count) + " rows from row " + std::to_string(begin) +
                      " are outside /" + split + " (" + std::to_string(s.n) + " samples)");
    ImageSplit out;
    out.count = count;
    out.h = s.h;
    out.w = s.w;
    out.c = s.c;
    out.num_classes = info.num_classes;
    out.mean = static_cast<float>(info.mean);
    out.std = static_cast<float>(info.std);
    // Within what the file holds: inspect_file checked the extents against its stored bytes.
    out.pixels.resize(static_cast<size_t>(count) * s.h * s.w * s.c);
    out.labels.resize(static_cast<size_t>(count));
    read_rows(file, dataset_name(split, layout::kImages), begin, count, H5T_NATIVE_UINT8, out.pixels.data());
    read_rows(file, dataset_name(split, layout::kLabels), begin, count, H5T_NATIVE_INT32, out.labels.data());
    check_labels(path, split, out.labels, begin, out.num_classes);
    return out;
  });
}

}  // namespace

void check_image_dataset(const std::string& h5_path) {
  with_image_file(h5_path, [&](hid_t file) {
    const ImageFileInfo info = inspect_file(file, h5_path);
    for (const auto& [split, shape] : {std::pair{layout::kTrain, info.train}, std::pair{layout::kEval, info.eval}}) {
      std::vector<int32_t> labels(static_cast<size_t>(shape.n));
      read_rows(file, dataset_name(split, layout::kLabels), 0, shape.n, H5T_NATIVE_INT32, labels.data());
      check_labels(h5_path, split, labels, 0, info.num_classes);
    }
  });
}

ImageSplit load_image_split(const std::string& h5_path, const std::string& split) {
  return load_rows(h5_path, split, 0, 0, /*whole=*/true);
}

ImageSplit load_image_rows(const std::string& h5_path, const std::string& split, int64_t begin, int64_t count) {
  return load_rows(h5_path, split, begin, count, /*whole=*/false);
}

void fill_image_batch(const ImageSplit& data, const int64_t* sample_indices, int n, const AugmentSpec& aug,
                      uint64_t seed, int epoch, float* out_nhwc, int32_t* labels_out) {
  MLPD_CHECK(n >= 0, "fill_image_batch: negative batch size");
  MLPD_CHECK(aug.std > 0.0f, "fill_image_batch: std must be positive");
  MLPD_CHECK(aug.pad >= 0 && aug.pad <= data.h && aug.pad <= data.w, "fill_image_batch: pad out of range");
  const int h = data.h, w = data.w, c = data.c;
  const size_t per = static_cast<size_t>(h) * w * c;
  float lut[256];
  for (int p = 0; p < 256; ++p) lut[p] = (static_cast<float>(p) / 255.0f - aug.mean) / aug.std;
  const float zero = lut[0];
  const bool crop = aug.enabled && aug.pad > 0;
  const bool flip = aug.enabled && aug.flip;
  const uint64_t stream = kAugmentStream + static_cast<uint64_t>(static_cast<uint32_t>(epoch));
  const uint64_t span = 2 * static_cast<uint64_t>(aug.pad) + 1;

  for (int i = 0; i < n; ++i) {
    const int64_t idx = sample_indices[i];
    MLPD_CHECK(idx >= 0 && idx < data.count, "fill_image_batch: sample index " + std::to_string(idx) +
                                                 " outside [0, " + std::to_string(data.count) + ")");
    const uint8_t* src = data.pixels.data() + static_cast<size_t>(idx) * per;
    float* dst = out_nhwc + static_cast<size_t>(i) * per;
    if (labels_out) labels_out[i] = data.labels[static_cast<size_t>(idx)];
    if (!crop && !flip) {
      for (size_t k = 0; k < per; ++k) dst[k] = lut[src[k]];
      continue;
    }
    // Draws keyed by (seed, epoch, sample): counters 4*idx+0 (x shift), +1 (y shift), +2 (flip).
    const uint64_t ctr = static_cast<uint64_t>(idx) * 4;
    const int dx = crop ? static_cast<int>(rng_below(seed, stream, ctr + 0, span)) - aug.pad : 0;
    const int dy = crop ? static_cast<int>(rng_below(seed, stream, ctr + 1, span)) - aug.pad : 0;
    const bool mirror = flip && rng_below(seed, stream, ctr + 2, 2) == 1;
    for (int y = 0; y < h; ++y) {
      float* drow = dst + static_cast<size_t>(y) * w * c;
      const int sy = y + dy;
      if (sy < 0 || sy >= h) {
        for (int k = 0; k < w * c; ++k) drow[k] = zero;
        continue;
      }
      const uint8_t* srow = src + static_cast<size_t>(sy) * w * c;
      for (int x = 0; x < w; ++x) {
        const int sx = (mirror ? w - 1 - x : x) + dx;
        float* d = drow + static_cast<size_t>(x) * c;
        if (sx < 0 || sx >= w) {
          for (int k = 0; k < c; ++k) d[k] = zero;
        } else {
          const uint8_t* s = srow + static_cast<size_t>(sx) * c;
          for (int k = 0; k < c; ++k) d[k] = lut[s[k]];
        }
      }
    }
  }
}

}  // namespace mlpd
