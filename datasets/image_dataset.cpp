#include "datasets/image_dataset.h"

#include <filesystem>

#include "core/check.h"
#include "core/rng.h"
#include "datasets/h5.h"
#include "datasets/layout.h"
#include "datasets/sampling.h"

namespace mlpd {

namespace {

[[noreturn]] void bad_file(const std::string& path, const std::string& why) {
  throw UserError("dataset " + path + ": " + why + "; run `" + kPrepareImageHint + "` to (re)build it");
}

void check_split_name(const std::string& split) {
  if (split != "train" && split != "eval")
    throw UserError("unknown dataset split '" + split + "' (expected \"train\" or \"eval\")");
}

// Everything but the pixels: validated shape and attributes of one split.
struct SplitInfo {
  int64_t n = 0;
  int h = 0, w = 0, c = 0;
  int num_classes = 0;
  double mean = 0.0, std = 1.0;
};

SplitInfo read_info(hid_t file, const std::string& path, const std::string& split, hid_t images, hid_t labels) {
  SplitInfo s;
  std::string format = h5_read_attr_str(file, layout::kAttrFormat);
  if (format != layout::kFormatName)
    bad_file(path, "format attribute is '" + format + "', expected '" + layout::kFormatName + "'");
  int64_t version = h5_read_attr_i64(file, layout::kAttrFormatVersion);
  if (version != layout::kFormatVersion)
    bad_file(path, "format version " + std::to_string(version) + ", this build reads version " +
                       std::to_string(layout::kFormatVersion));
  int64_t classes = h5_read_attr_i64(file, layout::kAttrNumClasses);
  if (classes < 1 || classes > (1 << 20)) bad_file(path, "num_classes " + std::to_string(classes) + " is invalid");
  s.num_classes = static_cast<int>(classes);

  H5Id train(H5_CHECK(H5Gopen2(file, "/train", H5P_DEFAULT)));
  s.mean = h5_read_attr_f64(train, layout::kAttrMean);
  s.std = h5_read_attr_f64(train, layout::kAttrStd);
  if (!(s.std > 0.0) || !(s.mean >= 0.0 && s.mean <= 1.0))
    bad_file(path, "/train mean/std attributes are invalid");

  H5Id ispace(H5_CHECK(H5Dget_space(images)));
  H5Id lspace(H5_CHECK(H5Dget_space(labels)));
  hsize_t idims[4] = {0, 0, 0, 0}, ldims[1] = {0};
  if (H5_CHECK(H5Sget_simple_extent_ndims(ispace)) != 4) bad_file(path, "/" + split + "/images is not [N,H,W,C]");
  if (H5_CHECK(H5Sget_simple_extent_ndims(lspace)) != 1) bad_file(path, "/" + split + "/labels is not [N]");
  H5_CHECK(H5Sget_simple_extent_dims(ispace, idims, nullptr));
  H5_CHECK(H5Sget_simple_extent_dims(lspace, ldims, nullptr));
  if (idims[0] != ldims[0])
    bad_file(path, "/" + split + " has " + std::to_string(idims[0]) + " images but " + std::to_string(ldims[0]) +
                       " labels");
  for (int d = 1; d < 4; ++d)
    if (idims[d] < 1 || idims[d] > 65536) bad_file(path, "/" + split + "/images has an invalid shape");
  H5Id itype(H5_CHECK(H5Dget_type(images)));
  H5Id ltype(H5_CHECK(H5Dget_type(labels)));
  if (H5_CHECK(H5Tget_class(itype)) != H5T_INTEGER || H5_CHECK(H5Tget_class(ltype)) != H5T_INTEGER)
    bad_file(path, "/" + split + " images/labels are not integer datasets");
  s.n = static_cast<int64_t>(idims[0]);
  s.h = static_cast<int>(idims[1]);
  s.w = static_cast<int>(idims[2]);
  s.c = static_cast<int>(idims[3]);
  return s;
}

ImageSplit load_rows(const std::string& path, const std::string& split, int64_t begin, int64_t count, bool whole) {
  check_split_name(split);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) bad_file(path, "file not found");
  if (!std::filesystem::is_regular_file(path, ec)) bad_file(path, "is not a regular file");

  H5Quiet quiet;
  ImageSplit out;
  try {
    if (H5Fis_hdf5(path.c_str()) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      bad_file(path, "is not an HDF5 file (or cannot be read)");
    }
    H5Id file(H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
    const std::string images_path = "/" + split + "/" + layout::kImages;
    const std::string labels_path = "/" + split + "/" + layout::kLabels;
    if (!h5_has_path(file, "/train")) bad_file(path, "has no /train group");
    if (!h5_has_path(file, images_path)) bad_file(path, "has no " + images_path + " dataset");
    if (!h5_has_path(file, labels_path)) bad_file(path, "has no " + labels_path + " dataset");
    H5Id images(H5_CHECK(H5Dopen2(file, images_path.c_str(), H5P_DEFAULT)));
    H5Id labels(H5_CHECK(H5Dopen2(file, labels_path.c_str(), H5P_DEFAULT)));
    SplitInfo s = read_info(file, path, split, images, labels);

    if (whole) {
      begin = 0;
      count = s.n;
    }
    if (begin < 0 || count < 0 || begin > s.n || count > s.n - begin)
      throw UserError("dataset " + path + ": rows [" + std::to_string(begin) + ", " + std::to_string(begin + count) +
                      ") are outside /" + split + " (" + std::to_string(s.n) + " samples)");

    out.count = count;
    out.h = s.h;
    out.w = s.w;
    out.c = s.c;
    out.num_classes = s.num_classes;
    out.mean = static_cast<float>(s.mean);
    out.std = static_cast<float>(s.std);
    const size_t per = static_cast<size_t>(s.h) * s.w * s.c;
    out.pixels.resize(static_cast<size_t>(count) * per);
    out.labels.resize(static_cast<size_t>(count));
    if (count > 0) {
      hsize_t start[4] = {static_cast<hsize_t>(begin), 0, 0, 0};
      hsize_t extent[4] = {static_cast<hsize_t>(count), static_cast<hsize_t>(s.h), static_cast<hsize_t>(s.w),
                           static_cast<hsize_t>(s.c)};
      H5Id ifile(H5_CHECK(H5Dget_space(images)));
      H5_CHECK(H5Sselect_hyperslab(ifile, H5S_SELECT_SET, start, nullptr, extent, nullptr));
      H5Id imem(H5_CHECK(H5Screate_simple(4, extent, nullptr)));
      H5_CHECK(H5Dread(images, H5T_NATIVE_UINT8, imem, ifile, H5P_DEFAULT, out.pixels.data()));

      H5Id lfile(H5_CHECK(H5Dget_space(labels)));
      H5_CHECK(H5Sselect_hyperslab(lfile, H5S_SELECT_SET, start, nullptr, extent, nullptr));
      H5Id lmem(H5_CHECK(H5Screate_simple(1, extent, nullptr)));
      H5_CHECK(H5Dread(labels, H5T_NATIVE_INT32, lmem, lfile, H5P_DEFAULT, out.labels.data()));
    }
  } catch (const H5Error& e) {
    bad_file(path, std::string("cannot be read (corrupt or truncated?): ") + e.what());
  }
  for (int64_t i = 0; i < out.count; ++i)
    if (out.labels[i] < 0 || out.labels[i] >= out.num_classes)
      bad_file(path, "/" + split + " label " + std::to_string(out.labels[i]) + " at row " +
                         std::to_string(begin + i) + " is outside [0, " + std::to_string(out.num_classes) + ")");
  return out;
}

}  // namespace

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
