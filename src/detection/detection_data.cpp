#include "detection/detection_data.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/check.h"
#include "core/rng.h"
#include "datasets/h5.h"
#include "datasets/layout.h"

namespace mlpd {

namespace dl = detection_layout;

namespace {

constexpr uint64_t kFlipStream = 0x4445'5446'4C49'5000ull;  // "DETFLIP"

std::string path_of(const std::string& split, const char* name) { return "/" + split + "/" + name; }

template <class T>
void write_array(hid_t group, const char* name, hid_t file_type, hid_t mem_type, std::vector<hsize_t> dims,
                 const T* data) {
  H5Id space(H5_CHECK(H5Screate_simple(int(dims.size()), dims.data(), nullptr)));
  // No modification times in the object headers: the same scenes give the same file, byte for byte.
  H5Id dcpl(H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
  H5_CHECK(H5Pset_obj_track_times(dcpl, false));
  H5Id ds(H5_CHECK(H5Dcreate2(group, name, file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT)));
  // An empty dataset has no storage to write (HDF5 accepts a null buffer only then).
  if (dims.empty() || dims[0] > 0) H5_CHECK(H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
}

void write_split(hid_t file, const char* name, const DetectionSplitData& d, double mean, double std) {
  H5Id gcpl(H5_CHECK(H5Pcreate(H5P_GROUP_CREATE)));
  H5_CHECK(H5Pset_obj_track_times(gcpl, false));
  H5Id g(H5_CHECK(H5Gcreate2(file, name, H5P_DEFAULT, gcpl, H5P_DEFAULT)));
  const hsize_t n = hsize_t(d.count), m = hsize_t(d.classes.size());
  write_array(g, layout::kImages, H5T_STD_U8LE, H5T_NATIVE_UINT8, {n, hsize_t(d.h), hsize_t(d.w), hsize_t(d.c)},
              d.images.data());
  write_array(g, dl::kImageIds, H5T_STD_I64LE, H5T_NATIVE_INT64, {n}, d.image_ids.data());
  write_array(g, dl::kInstFirst, H5T_STD_I64LE, H5T_NATIVE_INT64, {n + 1}, d.inst_first.data());
  write_array(g, dl::kBoxes, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {m, 4}, d.boxes.data());
  write_array(g, dl::kClasses, H5T_STD_I32LE, H5T_NATIVE_INT32, {m}, d.classes.data());
  write_array(g, dl::kIsCrowd, H5T_STD_U8LE, H5T_NATIVE_UINT8, {m}, d.iscrowd.data());
  write_array(g, dl::kArea, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {m}, d.area.data());
  std::vector<int64_t> first{0};
  std::vector<uint32_t> counts;
  for (const Rle& r : d.masks) {
    counts.insert(counts.end(), r.counts.begin(), r.counts.end());
    first.push_back(int64_t(counts.size()));
  }
  write_array(g, dl::kMaskFirst, H5T_STD_I64LE, H5T_NATIVE_INT64, {m + 1}, first.data());
  write_array(g, dl::kMaskCounts, H5T_STD_U32LE, H5T_NATIVE_UINT32, {hsize_t(counts.size())}, counts.data());
  h5_write_attr_i64(g, layout::kAttrCount, d.count);
  h5_write_attr_i64(g, layout::kAttrHeight, d.h);
  h5_write_attr_i64(g, layout::kAttrWidth, d.w);
  h5_write_attr_i64(g, layout::kAttrChannels, d.c);
  h5_write_attr_f64(g, layout::kAttrMean, mean);
  h5_write_attr_f64(g, layout::kAttrStd, std);
}

void check_split_data(const DetectionSplitData& d, const char* name) {
  const size_t m = d.classes.size();
  MLPD_CHECK(d.images.size() == size_t(d.count) * d.h * d.w * d.c && d.image_ids.size() == size_t(d.count) &&
                 d.inst_first.size() == size_t(d.count) + 1 && d.boxes.size() == 4 * m && d.area.size() == m &&
                 d.iscrowd.size() == m && d.masks.size() == m && d.inst_first.back() == int64_t(m),
             std::string("write_detection_file: inconsistent sizes in ") + name);
}

[[noreturn]] void bad_file(const std::string& path, const std::string& why) {
  throw UserError("dataset " + path + ": " + why + " (re-create it with `mlperf-dist prepare`)", 2);
}

template <class T>
std::vector<T> read_all(hid_t file, const std::string& name, hid_t mem_type, size_t count) {
  std::vector<T> v(count);
  if (count == 0) return v;
  H5Id ds(H5_CHECK(H5Dopen2(file, name.c_str(), H5P_DEFAULT)));
  H5_CHECK(H5Dread(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()));
  return v;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

// Reads and checks one split; pixels only when keep_pixels.
DetectionSplit read_split(hid_t file, const std::string& path, const std::string& split, bool keep_pixels) {
  if (split != layout::kTrain && split != layout::kEval)
    throw UserError("detection split '" + split + "': expected train or eval", 2);
  DetectionSplit s;
  s.num_classes = int(h5_read_attr_i64_within(file, layout::kAttrNumClasses, 1, 10000));
  s.class_names = split_lines(h5_read_attr_str(file, layout::kAttrClassNames));
  const auto img = h5_int_dataset_extents(file, path_of(split, layout::kImages), 1, false, 4);
  const auto ids = h5_int_dataset_extents(file, path_of(split, dl::kImageIds), 8, true, 1);
  const auto first = h5_int_dataset_extents(file, path_of(split, dl::kInstFirst), 8, true, 1);
  const auto boxes = h5_float_dataset_extents(file, path_of(split, dl::kBoxes), 2);
  const auto classes = h5_int_dataset_extents(file, path_of(split, dl::kClasses), 4, true, 1);
  const auto crowd = h5_int_dataset_extents(file, path_of(split, dl::kIsCrowd), 1, false, 1);
  const auto area = h5_float_dataset_extents(file, path_of(split, dl::kArea), 1);
  const auto mfirst = h5_int_dataset_extents(file, path_of(split, dl::kMaskFirst), 8, true, 1);
  const auto mcounts = h5_int_dataset_extents(file, path_of(split, dl::kMaskCounts), 4, false, 1);
  s.count = int64_t(img[0]);
  s.h = int(img[1]);
  s.w = int(img[2]);
  s.c = int(img[3]);
  const hsize_t m = classes[0];
  if (s.count < 1 || s.h < 1 || s.w < 1 || s.c < 1 || s.h > 8192 || s.w > 8192 || s.c > 4)
    bad_file(path, "/" + split + "/images has an implausible shape");
  if (ids[0] != hsize_t(s.count) || first[0] != hsize_t(s.count) + 1 || boxes[0] != m || boxes[1] != 4 ||
      crowd[0] != m || area[0] != m || mfirst[0] != m + 1)
    bad_file(path, "the datasets of /" + split + " disagree on the number of images or instances");
  H5Id g(H5_CHECK(H5Gopen2(file, split.c_str(), H5P_DEFAULT)));
  s.mean = h5_read_attr_f64(g, layout::kAttrMean);
  s.std = h5_read_attr_f64(g, layout::kAttrStd);
  if (!(s.std > 0.0) || !(s.mean >= 0.0 && s.mean <= 1.0)) bad_file(path, "/" + split + " has a bad mean or std");
  s.image_ids = read_all<int64_t>(file, path_of(split, dl::kImageIds), H5T_NATIVE_INT64, ids[0]);
  s.inst_first = read_all<int64_t>(file, path_of(split, dl::kInstFirst), H5T_NATIVE_INT64, first[0]);
  s.boxes = read_all<float>(file, path_of(split, dl::kBoxes), H5T_NATIVE_FLOAT, m * 4);
  s.classes = read_all<int32_t>(file, path_of(split, dl::kClasses), H5T_NATIVE_INT32, m);
  s.iscrowd = read_all<uint8_t>(file, path_of(split, dl::kIsCrowd), H5T_NATIVE_UINT8, m);
  s.area = read_all<float>(file, path_of(split, dl::kArea), H5T_NATIVE_FLOAT, m);
  s.mask_first = read_all<int64_t>(file, path_of(split, dl::kMaskFirst), H5T_NATIVE_INT64, m + 1);
  s.mask_counts = read_all<uint32_t>(file, path_of(split, dl::kMaskCounts), H5T_NATIVE_UINT32, mcounts[0]);
  // Offsets: start at 0, never decrease, end at the total.
  if (s.inst_first.front() != 0 || s.inst_first.back() != int64_t(m) ||
      !std::is_sorted(s.inst_first.begin(), s.inst_first.end()))
    bad_file(path, "/" + split + "/inst_first is not a monotone offset list from 0 to " + std::to_string(m));
  if (s.mask_first.front() != 0 || s.mask_first.back() != int64_t(mcounts[0]) ||
      !std::is_sorted(s.mask_first.begin(), s.mask_first.end()))
    bad_file(path, "/" + split + "/mask_first is not a monotone offset list over mask_counts");
  for (size_t j = 0; j < m; ++j) {
    if (s.classes[j] < 1 || s.classes[j] > s.num_classes)
      bad_file(path, "/" + split + "/classes holds " + std::to_string(s.classes[j]) + " at instance " +
                         std::to_string(j) + ", outside 1.." + std::to_string(s.num_classes));
    uint64_t total = 0;
    for (int64_t k = s.mask_first[j]; k < s.mask_first[j + 1]; ++k) total += s.mask_counts[size_t(k)];
    if (total != uint64_t(s.h) * uint64_t(s.w))
      bad_file(path, "/" + split + " mask of instance " + std::to_string(j) + " covers " + std::to_string(total) +
                         " pixels, not the image's " + std::to_string(s.h) + "x" + std::to_string(s.w));
    const float* b = &s.boxes[4 * j];
    if (!(b[2] >= 0 && b[3] >= 0 && std::isfinite(b[0]) && std::isfinite(b[1])))
      bad_file(path, "/" + split + "/boxes has a bad box at instance " + std::to_string(j));
  }
  if (keep_pixels) s.images = read_all<uint8_t>(file, path_of(split, layout::kImages), H5T_NATIVE_UINT8,
                                                size_t(s.count) * s.h * s.w * s.c);
  return s;
}

template <class Read>
auto with_detection_file(const std::string& path, Read read) {
  H5Quiet quiet;
  try {
    H5Id file = h5_open_prepared(path);
    h5_check_layout_format(file);
    return read(file.get());
  } catch (const H5LayoutError& e) {
    bad_file(path, e.what());
  } catch (const H5Error& e) {
    bad_file(path, std::string("cannot be read (corrupt or truncated?): ") + e.what());
  }
}

}  // namespace

Rle instance_mask(const DetectionSplit& s, int64_t j) {
  Rle r;
  r.h = s.h;
  r.w = s.w;
  r.counts.assign(s.mask_counts.begin() + s.mask_first[size_t(j)], s.mask_counts.begin() + s.mask_first[size_t(j) + 1]);
  return r;
}

DetectionSplit load_detection_split(const std::string& path, const std::string& split) {
  return with_detection_file(path, [&](hid_t file) { return read_split(file, path, split, true); });
}

void check_detection_data(const std::string& path) {
  with_detection_file(path, [&](hid_t file) {
    const DetectionSplit t = read_split(file, path, layout::kTrain, false);
    const DetectionSplit e = read_split(file, path, layout::kEval, false);
    if (t.h != e.h || t.w != e.w || t.c != e.c)
      bad_file(path, "/train and /eval images differ in shape");
    return 0;
  });
}

void write_detection_file(const std::string& out_h5, const DetectionFileInfo& info, const DetectionSplitData& train,
                          const DetectionSplitData& eval) {
  check_split_data(train, "train");
  check_split_data(eval, "eval");
  double sum = 0, sq = 0;
  for (uint8_t p : train.images) {
    const double v = p / 255.0;
    sum += v;
    sq += v * v;
  }
  const double n = double(std::max<size_t>(1, train.images.size()));
  const double mean = sum / n, std = std::sqrt(std::max(1e-12, sq / n - mean * mean));
  std::string names;
  for (const std::string& c : info.class_names) names += (names.empty() ? "" : "\n") + c;
  write_h5_atomically(out_h5, [&](const std::string& tmp) {
    H5Id file(H5_CHECK(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)));
    h5_write_attr_str(file, layout::kAttrFormat, layout::kFormatName);
    h5_write_attr_i64(file, layout::kAttrFormatVersion, layout::kFormatVersion);
    h5_write_attr_str(file, layout::kAttrBenchmark, info.benchmark);
    h5_write_attr_str(file, layout::kAttrScale, info.scale);
    h5_write_attr_i64(file, layout::kAttrNumClasses, int64_t(info.class_names.size()));
    h5_write_attr_str(file, layout::kAttrClassNames, names);
    h5_write_attr_str(file, layout::kAttrSource, info.source);
    h5_write_attr_str(file, layout::kAttrLicence, info.licence);
    h5_write_attr_str(file, layout::kAttrCreatedBy, info.created_by);
    write_split(file, layout::kTrain, train, mean, std);
    write_split(file, layout::kEval, eval, mean, std);
    file.close();  // flushes; a failure here must not leave a file that looks complete
  });
}

void fill_detection_batch(const DetectionSplit& s, const int64_t* idx, int n, bool train_augment, uint64_t seed,
                          int epoch, DetectionBatch& out) {
  MLPD_CHECK(n >= 0, "fill_detection_batch: negative batch");
  const size_t per_image = size_t(s.h) * s.w * s.c;
  out.n = n;
  out.x.resize(per_image * size_t(n));
  out.gt_boxes.clear();
  out.gt_labels.clear();
  out.gt_instance.clear();
  out.gt_first.assign(1, 0);
  out.flipped.assign(size_t(n), 0);
  const float scale = float(1.0 / (255.0 * s.std)), shift = float(s.mean / s.std);
  const float W = float(s.w), H = float(s.h);
  for (int i = 0; i < n; ++i) {
    const int64_t k = idx[i];
    MLPD_CHECK(k >= 0 && k < s.count, "fill_detection_batch: image index out of range");
    const bool flip = train_augment && rng_below(seed, kFlipStream ^ uint64_t(uint32_t(epoch)), uint64_t(k), 2) == 1;
    out.flipped[size_t(i)] = flip ? 1 : 0;
    const uint8_t* src = s.images.data() + per_image * size_t(k);
    float* dst = out.x.data() + per_image * size_t(i);
    for (int y = 0; y < s.h; ++y)
      for (int x = 0; x < s.w; ++x) {
        const int sx = flip ? s.w - 1 - x : x;
        for (int c = 0; c < s.c; ++c)
          dst[(size_t(y) * s.w + x) * s.c + c] = float(src[(size_t(y) * s.w + sx) * s.c + c]) * scale - shift;
      }
    for (int64_t j = s.inst_first[size_t(k)]; j < s.inst_first[size_t(k) + 1]; ++j) {
      if (s.iscrowd[size_t(j)]) continue;
      const float* b = &s.boxes[4 * size_t(j)];
      float x1 = b[0] / W, x2 = (b[0] + b[2]) / W;
      if (flip) {
        const float t = 1.0f - x2;
        x2 = 1.0f - x1;
        x1 = t;
      }
      out.gt_boxes.insert(out.gt_boxes.end(), {x1, b[1] / H, x2, (b[1] + b[3]) / H});
      out.gt_labels.push_back(s.classes[size_t(j)]);
      out.gt_instance.push_back(j);
    }
    out.gt_first.push_back(int32_t(out.gt_labels.size()));
  }
}

}  // namespace mlpd
