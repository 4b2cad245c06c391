// The structured half of h5_fuzz: fuzz bytes become the decisions of a small HDF5 file writer,
// so the loaders meet every shape, dtype, layout, attribute kind and value a hostile or stale file
// can hold, while libhdf5 only ever reads files it wrote itself (we fuzz our code, not its
// parser; raw-byte corruption is covered by tests/cli/missing_data.sh).
//
// Every decision reads 0 when the input runs out, and 0 means "as a prepared file has it": a
// short input is a valid resnet or ncf file (datasets/README.md, datasets/movielens.h) and each
// byte the fuzzer adds perturbs one thing. Decisions come from the input's end
// (FuzzedDataProvider), value bytes from its front.
#pragma once
#include <fuzzer/FuzzedDataProvider.h>
#include <hdf5.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "datasets/h5.h"
#include "datasets/layout.h"
#include "mlperf/keys.h"

namespace mlpd::fuzz {

// HDF5 refused what the generator asked for (a chunk larger than a fixed dimension, a compact
// dataset over 64 KiB): not an input worth running.
struct Skip {};

template <class T>
T ok(T status) {
  if (status < 0) throw Skip{};
  return status;
}

class H5FileGen {
 public:
  explicit H5FileGen(FuzzedDataProvider& f) : f_(f) {}

  // Writes the file; returns the benchmark it was written for ("resnet" or "ncf").
  std::string write(const std::string& path, const std::string& scale) {
    H5Id file(ok(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)));
    const bool ncf = f_.ConsumeBool();
    attr_str(file, layout::kAttrFormat, layout::kFormatName);
    attr_i64(file, layout::kAttrFormatVersion, layout::kFormatVersion);
    attr_str(file, layout::kAttrBenchmark, ncf ? keys::kNcf : keys::kResnet);
    attr_str(file, layout::kAttrScale, scale);
    if (ncf)
      write_ncf(file);
    else
      write_images(file);
    return ncf ? keys::kNcf : keys::kResnet;
  }

 private:
  FuzzedDataProvider& f_;

  enum How { kAsPrepared = 0, kAbsent = 1, kWrongObject = 2, kPerturbed = 3 };
  How how() { return static_cast<How>(f_.ConsumeIntegralInRange<int>(0, 3)); }
  int64_t small(int64_t base, int64_t extra) { return base + f_.ConsumeIntegralInRange<int64_t>(0, extra); }

  void write_images(hid_t file) {
    attr_i64(file, layout::kAttrNumClasses, small(10, 6));
    const hsize_t h = static_cast<hsize_t>(small(4, 3)), w = static_cast<hsize_t>(small(4, 3));
    const hsize_t c = static_cast<hsize_t>(small(1, 2));
    for (const bool train : {true, false}) {
      H5Id g = group(file, train ? layout::kTrain : layout::kEval);
      if (g.get() < 0) continue;
      const int64_t n = small(train ? 6 : 3, 9);
      if (train) {
        attr_f64(g, layout::kAttrMean, 0.29);
        attr_f64(g, layout::kAttrStd, 0.35);
      }
      attr_i64(g, layout::kAttrCount, n);
      attr_i64(g, layout::kAttrHeight, static_cast<int64_t>(h));
      attr_i64(g, layout::kAttrWidth, static_cast<int64_t>(w));
      attr_i64(g, layout::kAttrChannels, static_cast<int64_t>(c));
      dataset(g, layout::kImages, {static_cast<hsize_t>(n), h, w, c}, H5T_STD_U8LE, 256);
      dataset(g, layout::kLabels, {static_cast<hsize_t>(n)}, H5T_STD_I32LE, 10);
    }
  }

  void write_ncf(hid_t file) {
    // As prepare writes them (names of datasets/movielens.h, private to movielens.cpp): negatives <
    // items <= the ratings (positives + one held out per user).
    const int64_t users = small(3, 5), items = small(6, 6), negatives = small(2, 3), positives = small(10, 10);
    attr_i64(file, "num_users", users);
    attr_i64(file, "num_items", items);
    attr_i64(file, "eval_negatives", negatives);
    const auto u = static_cast<hsize_t>(users), k = static_cast<hsize_t>(negatives);
    const auto p = static_cast<hsize_t>(positives);
    if (H5Id g = group(file, layout::kTrain); g.get() >= 0) {
      attr_i64(g, layout::kAttrCount, positives);
      dataset(g, "users", {p}, H5T_STD_I32LE, users);
      dataset(g, "items", {p}, H5T_STD_I32LE, items);
    }
    if (H5Id g = group(file, layout::kEval); g.get() >= 0) {
      attr_i64(g, layout::kAttrCount, users);
      dataset(g, "items", {u}, H5T_STD_I32LE, items);
      dataset(g, "negatives", {u, k}, H5T_STD_I32LE, items);
    }
  }

  // A group as prepared, absent (invalid id), or a scalar dataset where the group belongs.
  H5Id group(hid_t parent, const char* name) {
    switch (how()) {
      case kAbsent: return H5Id();
      case kWrongObject: {
        H5Id space(ok(H5Screate(H5S_SCALAR)));
        H5Id ds(ok(H5Dcreate2(parent, name, H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
        return H5Id();
      }
      default: return H5Id(ok(H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
    }
  }

  // ---- values near the intended one ----
  int64_t int_near(int64_t want) {
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
    return f_.PickValueInArray<int64_t>({want, 0, -1, 1, 2, want + 1, want - 1, -want, int64_t{1} << 31,
                                         (int64_t{1} << 31) - 1, int64_t{1} << 40, kMax, kMin, want * 1000003});
  }
  double dbl_near(double want) {
    const double inf = std::numeric_limits<double>::infinity();
    return f_.PickValueInArray<double>({want, 0.0, -1.0, 1.0, 0.5, std::nan(""), inf, -inf, 1e300, 1e-300,
                                        std::numeric_limits<double>::max(), -want});
  }
  std::string str_near(const std::string& want) {
    const int pick = f_.ConsumeIntegralInRange<int>(0, 8);
    static const char* const kWords[] = {"", "resnet", "ncf", "mini", "reference", "mlperf-dist-hdf5", "train"};
    if (pick < 7) return pick == 0 ? want : kWords[pick - 1];
    return f_.ConsumeRandomLengthString(64);
  }

  // ---- attributes: as prepared, absent, or of another kind, shape or value ----
  void attr_i64(hid_t obj, const char* name, int64_t want) {
    const How h = how();
    if (h == kAsPrepared) return put_scalar(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &want);
    if (h != kAbsent) attr_any(obj, name, want, static_cast<double>(want), std::to_string(want));
  }
  void attr_f64(hid_t obj, const char* name, double want) {
    const How h = how();
    if (h == kAsPrepared) return put_scalar(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &want);
    if (h != kAbsent) attr_any(obj, name, static_cast<int64_t>(want * 100), want, std::to_string(want));
  }
  void attr_str(hid_t obj, const char* name, const std::string& want) {
    const How h = how();
    if (h == kAsPrepared) return put_fixed_str(obj, name, want);
    if (h != kAbsent) attr_any(obj, name, 1, 1.0, want);
  }

  void attr_any(hid_t obj, const char* name, int64_t i, double d, const std::string& s) {
    switch (f_.ConsumeIntegralInRange<int>(0, 7)) {
      case 0: {  // an integer, of int64 or of a type too narrow for it
        const int64_t v = int_near(i);
        return put_scalar(obj, name, f_.ConsumeBool() ? H5T_STD_I8LE : H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
      }
      case 1: {  // a float, double or single (1e300 overflows the latter)
        const double v = dbl_near(d);
        return put_scalar(obj, name, f_.ConsumeBool() ? H5T_IEEE_F32LE : H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v);
      }
      case 2: return put_fixed_str(obj, name, str_near(s));
      case 3: {
        const std::string v = str_near(s);
        H5Id type(ok(H5Tcopy(H5T_C_S1)));
        ok(H5Tset_size(type, H5T_VARIABLE));
        const char* p = v.c_str();
        return put(obj, name, type, type, H5Id(ok(H5Screate(H5S_SCALAR))), &p);
      }
      case 4: {  // an array where a scalar belongs (0 to 4 elements)
        const hsize_t n = f_.ConsumeIntegralInRange<hsize_t>(0, 4);
        std::vector<int64_t> v(n + 1, int_near(i));
        return put(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, H5Id(ok(H5Screate_simple(1, &n, nullptr))), v.data());
      }
      case 5: {  // a null dataspace: an attribute with no value at all
        int64_t v = 0;
        return put(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, H5Id(ok(H5Screate(H5S_NULL))), &v);
      }
      case 6: {  // above int64's range
        const uint64_t v = uint64_t{1} << 63 | static_cast<uint64_t>(i);
        return put_scalar(obj, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &v);
      }
      default: {  // two fixed strings where one belongs
        const hsize_t n = 2;
        char v[2][8] = {"resnet", "ncf"};
        H5Id type(ok(H5Tcopy(H5T_C_S1)));
        ok(H5Tset_size(type, 8));
        return put(obj, name, type, type, H5Id(ok(H5Screate_simple(1, &n, nullptr))), v);
      }
    }
  }

  void put(hid_t obj, const char* name, hid_t file_type, hid_t mem_type, const H5Id& space, const void* v) {
    H5Id a(ok(H5Acreate2(obj, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT)));
    ok(H5Awrite(a, mem_type, v));
  }
  void put_scalar(hid_t obj, const char* name, hid_t file_type, hid_t mem_type, const void* v) {
    put(obj, name, file_type, mem_type, H5Id(ok(H5Screate(H5S_SCALAR))), v);
  }
  void put_fixed_str(hid_t obj, const char* name, const std::string& v) {
    H5Id type(ok(H5Tcopy(H5T_C_S1)));
    ok(H5Tset_size(type, v.empty() ? 1 : v.size()));
    ok(H5Tset_strpad(type, H5T_STR_NULLPAD));
    std::string padded = v.empty() ? std::string(1, '\0') : v;
    put_scalar(obj, name, type, type, padded.data());
  }

  // ---- datasets: as prepared, absent, a group instead, or another shape/type/layout/content ----
  void dataset(hid_t parent, const char* name, std::vector<hsize_t> dims, hid_t type, int64_t bound) {
    const How h = how();
    if (h == kAbsent) return;
    if (h == kWrongObject) {
      H5Id g(ok(H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
      return;
    }
    int layout = 1;  // chunked along N, as prepare writes images
    bool outliers = false, write_values = true;
    if (h == kPerturbed) {
      const size_t rank = f_.ConsumeIntegralInRange<size_t>(0, 5);
      std::vector<hsize_t> d(rank);
      for (size_t i = 0; i < rank; ++i)
        d[i] = f_.PickValueInArray<hsize_t>({i < dims.size() ? dims[i] : 1, 0, 1, 2, 3, 28, 65536, 65537,
                                             hsize_t{1} << 20, hsize_t{1} << 31, hsize_t{1} << 40});
      dims = d;
      type = f_.PickValueInArray<hid_t>({type, H5T_STD_U8LE, H5T_STD_I8LE, H5T_STD_I16LE, H5T_STD_I32LE,
                                         H5T_STD_U32LE, H5T_STD_I64LE, H5T_STD_U64LE, H5T_IEEE_F32LE,
                                         H5T_IEEE_F64LE, H5T_C_S1, H5T_STD_I32BE});
      layout = f_.ConsumeIntegralInRange<int>(0, 3);  // contiguous, chunked, chunked unlimited, compact
      outliers = f_.ConsumeBool();
      write_values = !f_.ConsumeBool();  // unwritten: HDF5 reads the fill value, the file holds nothing
    }
    hsize_t elements = 1;
    for (hsize_t d : dims)
      if (__builtin_mul_overflow(elements, d, &elements) || elements > (hsize_t{1} << 48)) throw Skip{};

    std::vector<hsize_t> maxdims(dims);
    if (layout == 2) maxdims.assign(dims.size(), H5S_UNLIMITED);
    H5Id space(ok(dims.empty() ? H5Screate(H5S_SCALAR)
                               : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), maxdims.data())));
    H5Id dcpl(ok(H5Pcreate(H5P_DATASET_CREATE)));
    if (layout == 1 || layout == 2) {
      std::vector<hsize_t> chunk(dims.size());
      for (size_t i = 0; i < dims.size(); ++i) chunk[i] = dims[i] == 0 ? 1 : std::min<hsize_t>(dims[i], 64);
      ok(H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data()));
    } else if (layout == 3) {
      ok(H5Pset_layout(dcpl, H5D_COMPACT));
    }
    H5Id ds(ok(H5Dcreate2(parent, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT)));
    if (!write_values || elements == 0 || elements > (1 << 14) || type == H5T_C_S1) return;
    const std::vector<uint8_t> raw = f_.ConsumeBytes<uint8_t>(elements);
    std::vector<int64_t> v(elements);
    for (size_t i = 0; i < elements; ++i) {
      const uint8_t r = i < raw.size() ? raw[i] : 0;
      v[i] = bound > 0 ? r % bound : r;
      if (outliers && r >= 252)
        v[i] = r == 252 ? bound : r == 253 ? -1 : r == 254 ? std::numeric_limits<int32_t>::max() : -bound;
    }
    ok(H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()));
  }
};

}  // namespace mlpd::fuzz
