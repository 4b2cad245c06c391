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

struct DetectionWriter::State {
  H5Id file;
  H5Id group, images;
  int64_t n = 0, next = 0;
  int h = 0, w = 0, c = 0;
  std::vector<int64_t> ids, first{0}, mask_first{0};
  std::vector<float> boxes, area;
  std::vector<int32_t> classes;
  std::vector<uint8_t> crowd;
  std::vector<uint32_t> counts;
  double sum = 0, sq = 0;
  uint64_t pixels = 0;
  int num_classes = 0;
};

DetectionWriter::DetectionWriter(const std::string& path, const DetectionFileInfo& info) : s_(new State) {
  std::string names;
  for (const std::string& c : info.class_names) names += (names.empty() ? "" : "\n") + c;
  s_->num_classes = int(info.class_names.size());
  s_->file = H5Id(H5_CHECK(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)));
  const hid_t f = s_->file;
  h5_write_attr_str(f, layout::kAttrFormat, layout::kFormatName);
  h5_write_attr_i64(f, layout::kAttrFormatVersion, layout::kFormatVersion);
  h5_write_attr_str(f, layout::kAttrBenchmark, info.benchmark);
  h5_write_attr_str(f, layout::kAttrScale, info.scale);
  h5_write_attr_i64(f, layout::kAttrNumClasses, int64_t(info.class_names.size()));
  h5_write_attr_str(f, layout::kAttrClassNames, names);
  h5_write_attr_str(f, layout::kAttrSource, info.source);
  h5_write_attr_str(f, layout::kAttrLicence, info.licence);
  h5_write_attr_str(f, layout::kAttrCreatedBy, info.created_by);
  for (const auto& [name, value] : info.extra_attrs) h5_write_attr_str(f, name.c_str(), value);
}

DetectionWriter::~DetectionWriter() { delete s_; }

void DetectionWriter::begin_split(const char* name, int64_t images, int h, int w, int c) {
  MLPD_CHECK(images >= 1 && h > 0 && w > 0 && c > 0, "DetectionWriter: bad split shape");
  State& s = *s_;
  s.n = images;
  s.next = 0;
  s.h = h, s.w = w, s.c = c;
  s.ids.clear();
  s.first.assign(1, 0);
  s.mask_first.assign(1, 0);
  s.boxes.clear(), s.area.clear(), s.classes.clear(), s.crowd.clear(), s.counts.clear();
  s.sum = s.sq = 0;
  s.pixels = 0;
  H5Id gcpl(H5_CHECK(H5Pcreate(H5P_GROUP_CREATE)));
  H5_CHECK(H5Pset_obj_track_times(gcpl, false));
  s.group = H5Id(H5_CHECK(H5Gcreate2(s.file, name, H5P_DEFAULT, gcpl, H5P_DEFAULT)));
  const hsize_t dims[4] = {hsize_t(images), hsize_t(h), hsize_t(w), hsize_t(c)};
  const hsize_t chunk[4] = {1, hsize_t(h), hsize_t(w), hsize_t(c)};
  H5Id space(H5_CHECK(H5Screate_simple(4, dims, nullptr)));
  H5Id dcpl(H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
  H5_CHECK(H5Pset_obj_track_times(dcpl, false));
  H5_CHECK(H5Pset_chunk(dcpl, 4, chunk));
  s.images = H5Id(H5_CHECK(H5Dcreate2(s.group, layout::kImages, H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT)));
}

void DetectionWriter::add_image(int64_t image_id, const uint8_t* pixels, const std::vector<DetectionInstance>& inst) {
  State& s = *s_;
  MLPD_CHECK(s.next < s.n, "DetectionWriter: more images than begin_split announced");
  const hsize_t start[4] = {hsize_t(s.next), 0, 0, 0};
  const hsize_t count[4] = {1, hsize_t(s.h), hsize_t(s.w), hsize_t(s.c)};
  H5Id fspace(H5_CHECK(H5Dget_space(s.images)));
  H5_CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, nullptr, count, nullptr));
  H5Id mspace(H5_CHECK(H5Screate_simple(4, count, nullptr)));
  H5_CHECK(H5Dwrite(s.images, H5T_NATIVE_UINT8, mspace, fspace, H5P_DEFAULT, pixels));
  const size_t np = size_t(s.h) * s.w * s.c;
  for (size_t i = 0; i < np; ++i) {
    const double v = pixels[i] / 255.0;
    s.sum += v;
    s.sq += v * v;
  }
  s.pixels += np;
  s.ids.push_back(image_id);
  for (const DetectionInstance& d : inst) {
    MLPD_CHECK(d.cls >= 1 && d.cls <= s.num_classes, "DetectionWriter: class outside 1..K");
    MLPD_CHECK(d.mask.h == s.h && d.mask.w == s.w, "DetectionWriter: mask of another size than the image");
    s.boxes.insert(s.boxes.end(), d.box, d.box + 4);
    s.classes.push_back(d.cls);
    s.crowd.push_back(d.iscrowd ? 1 : 0);
    s.area.push_back(d.area);
    s.counts.insert(s.counts.end(), d.mask.counts.begin(), d.mask.counts.end());
    s.mask_first.push_back(int64_t(s.counts.size()));
  }
  s.first.push_back(int64_t(s.classes.size()));
  ++s.next;
}

std::pair<double, double> DetectionWriter::pixel_stats() const {
  const double n = double(std::max<uint64_t>(1, s_->pixels));
  const double mean = s_->sum / n;
  return {mean, std::sqrt(std::max(1e-12, s_->sq / n - mean * mean))};
}

void DetectionWriter::end_split(double mean, double std) {
  State& s = *s_;
  MLPD_CHECK(s.next == s.n, "DetectionWriter: fewer images than begin_split announced");
  const hsize_t m = hsize_t(s.classes.size());
  const hid_t g = s.group;
  write_array(g, dl::kImageIds, H5T_STD_I64LE, H5T_NATIVE_INT64, {hsize_t(s.n)}, s.ids.data());
  write_array(g, dl::kInstFirst, H5T_STD_I64LE, H5T_NATIVE_INT64, {hsize_t(s.n) + 1}, s.first.data());
  write_array(g, dl::kBoxes, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {m, 4}, s.boxes.data());
  write_array(g, dl::kClasses, H5T_STD_I32LE, H5T_NATIVE_INT32, {m}, s.classes.data());
  write_array(g, dl::kIsCrowd, H5T_STD_U8LE, H5T_NATIVE_UINT8, {m}, s.crowd.data());
  write_array(g, dl::kArea, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {m}, s.area.data());
  write_array(g, dl::kMaskFirst, H5T_STD_I64LE, H5T_NATIVE_INT64, {m + 1}, s.mask_first.data());
  write_array(g, dl::kMaskCounts, H5T_STD_U32LE, H5T_NATIVE_UINT32, {hsize_t(s.counts.size())}, s.counts.data());
  h5_write_attr_i64(g, layout::kAttrCount, s.n);
  h5_write_attr_i64(g, layout::kAttrHeight, s.h);
  h5_write_attr_i64(g, layout::kAttrWidth, s.w);
  h5_write_attr_i64(g, layout::kAttrChannels, s.c);
  h5_write_attr_f64(g, layout::kAttrMean, mean);
  h5_write_attr_f64(g, layout::kAttrStd, std);
  s.images = H5Id();
  s.group = H5Id();
}

void DetectionWriter::close() { s_->file.close(); }  // flushes: a failure must not leave a file that looks whole

void write_detection_file(const std::string& out_h5, const DetectionFileInfo& info, const DetectionSplitData& train,
                          const DetectionSplitData& eval) {
  check_split_data(train, "train");
  check_split_data(eval, "eval");
  write_h5_atomically(out_h5, [&](const std::string& tmp) {
    DetectionWriter w(tmp, info);
    double mean = 0, std = 1;
    for (const DetectionSplitData* d : {&train, &eval}) {
      w.begin_split(d == &train ? layout::kTrain : layout::kEval, d->count, d->h, d->w, d->c);
      const size_t per = size_t(d->h) * d->w * d->c;
      std::vector<DetectionInstance> inst;
      for (int64_t i = 0; i < d->count; ++i) {
        inst.clear();
        for (int64_t j = d->inst_first[size_t(i)]; j < d->inst_first[size_t(i) + 1]; ++j) {
          DetectionInstance x;
          std::copy(d->boxes.begin() + 4 * j, d->boxes.begin() + 4 * j + 4, x.box);
          x.cls = d->classes[size_t(j)];
          x.iscrowd = d->iscrowd[size_t(j)] != 0;
          x.area = d->area[size_t(j)];
          x.mask = d->masks[size_t(j)];
          inst.push_back(std::move(x));
        }
        w.add_image(d->image_ids[size_t(i)], d->images.data() + per * size_t(i), inst);
      }
      if (d == &train) std::tie(mean, std) = w.pixel_stats();
      w.end_split(mean, std);
    }
    w.close();
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
