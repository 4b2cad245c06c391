#include "datasets/h5.h"
#include "core/check.h"
#include "datasets/layout.h"
#include <unistd.h>
#include <filesystem>

#include <vector>

namespace mlpd {

namespace {

struct StackText {
  std::string api;        // the outermost entry: the API function that failed
  std::string innermost;  // where HDF5 first detected the problem
  int entries = 0;
};

herr_t collect(unsigned, const H5E_error2_t* e, void* client) {
  auto* t = static_cast<StackText*>(client);
  std::string entry = std::string(e->func_name ? e->func_name : "?") + ": " + (e->desc ? e->desc : "");
  if (t->entries == 0) t->api = entry;
  t->innermost = entry;
  ++t->entries;
  return 0;
}

}  // namespace

void h5_fail(const char* call, const char* file, int line) {
  StackText t;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect, &t);
  H5Eclear2(H5E_DEFAULT);
  std::string msg = std::string(file) + ":" + std::to_string(line) + ": " + call + " failed";
  if (t.entries > 0) {
    msg += ": " + t.api;
    if (t.entries > 1) msg += " (" + t.innermost + ")";
  }
  throw H5Error(msg);
}

void H5Id::close() {
  if (id_ < 0) return;
  hid_t id = id_;
  id_ = H5I_INVALID_HID;
  H5_CHECK(H5Idec_ref(id));
}

void H5Id::release() noexcept {
  if (id_ < 0) return;
  H5Quiet quiet;
  H5Idec_ref(id_);
  H5Eclear2(H5E_DEFAULT);
  id_ = H5I_INVALID_HID;
}

H5Quiet::H5Quiet() {
  H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

H5Quiet::~H5Quiet() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

namespace {

H5Id scalar_space() { return H5Id(H5_CHECK(H5Screate(H5S_SCALAR))); }

// The path of a file, group or dataset ("/", "/train"), for messages.
std::string object_name(hid_t obj) {
  char name[256] = {0};
  if (H5Iget_name(obj, name, sizeof name) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return "?";
  }
  return name;
}

[[noreturn]] void bad_attr(hid_t obj, const char* name, const std::string& why) {
  throw H5LayoutError(std::string("attribute '") + name + "' of " + object_name(obj) + " " + why);
}

// Opens a scalar attribute: reading an array attribute into one value would write past it.
H5Id open_scalar_attr(hid_t obj, const char* name) {
  if (!h5_has_attr(obj, name)) bad_attr(obj, name, "is missing");
  H5Id attr(H5_CHECK(H5Aopen(obj, name, H5P_DEFAULT)));
  H5Id space(H5_CHECK(H5Aget_space(attr)));
  if (H5_CHECK(H5Sget_simple_extent_npoints(space)) != 1) bad_attr(obj, name, "is not a scalar");
  return attr;
}

// Longest fixed-length string attribute read: far above any name or provenance text we write.
constexpr size_t kMaxAttrStringBytes = 1 << 20;

}  // namespace

void h5_write_attr_str(hid_t obj, const char* name, const std::string& value) {
  H5Id type(H5_CHECK(H5Tcopy(H5T_C_S1)));
  H5_CHECK(H5Tset_size(type, value.empty() ? 1 : value.size()));
  H5_CHECK(H5Tset_strpad(type, H5T_STR_NULLPAD));
  H5_CHECK(H5Tset_cset(type, H5T_CSET_UTF8));
  H5Id space = scalar_space();
  H5Id attr(H5_CHECK(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT)));
  std::string padded = value.empty() ? std::string(1, '\0') : value;
  H5_CHECK(H5Awrite(attr, type, padded.data()));
}

void h5_write_attr_i64(hid_t obj, const char* name, int64_t value) {
  H5Id space = scalar_space();
  H5Id attr(H5_CHECK(H5Acreate2(obj, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT)));
  H5_CHECK(H5Awrite(attr, H5T_NATIVE_INT64, &value));
}

void h5_write_attr_f64(hid_t obj, const char* name, double value) {
  H5Id space = scalar_space();
  H5Id attr(H5_CHECK(H5Acreate2(obj, name, H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT)));
  H5_CHECK(H5Awrite(attr, H5T_NATIVE_DOUBLE, &value));
}

bool h5_has_attr(hid_t obj, const char* name) { return H5_CHECK(H5Aexists(obj, name)) > 0; }

std::string h5_read_attr_str(hid_t obj, const char* name) {
  H5Id attr = open_scalar_attr(obj, name);
  H5Id type(H5_CHECK(H5Aget_type(attr)));
  if (H5_CHECK(H5Tget_class(type)) != H5T_STRING) bad_attr(obj, name, "is not a string");
  if (H5_CHECK(H5Tis_variable_str(type)) > 0) {
    H5Id mem(H5_CHECK(H5Tcopy(H5T_C_S1)));
    H5_CHECK(H5Tset_size(mem, H5T_VARIABLE));
    char* s = nullptr;
    H5_CHECK(H5Aread(attr, mem, &s));
    std::string out = s ? s : "";
    H5Id sp = scalar_space();
    H5_CHECK(H5Dvlen_reclaim(mem, sp, H5P_DEFAULT, &s));
    return out;
  }
  size_t n = H5Tget_size(type);
  if (n == 0) H5_CHECK(-1);
  if (n > kMaxAttrStringBytes) bad_attr(obj, name, "is longer than " + std::to_string(kMaxAttrStringBytes) + " bytes");
  std::vector<char> buf(n + 1, '\0');
  H5_CHECK(H5Aread(attr, type, buf.data()));
  return std::string(buf.data());  // stops at the first NUL (null-terminated or null-padded)
}

int64_t h5_read_attr_i64(hid_t obj, const char* name) {
  H5Id attr = open_scalar_attr(obj, name);
  H5Id type(H5_CHECK(H5Aget_type(attr)));
  if (H5_CHECK(H5Tget_class(type)) != H5T_INTEGER) bad_attr(obj, name, "is not an integer");
  int64_t v = 0;
  H5_CHECK(H5Aread(attr, H5T_NATIVE_INT64, &v));
  return v;
}

int64_t h5_read_attr_i64_within(hid_t obj, const char* name, int64_t lo, int64_t hi) {
  const int64_t v = h5_read_attr_i64(obj, name);
  if (v < lo || v > hi)
    bad_attr(obj, name, "is " + std::to_string(v) + ", outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

double h5_read_attr_f64(hid_t obj, const char* name) {
  H5Id attr = open_scalar_attr(obj, name);
  H5Id type(H5_CHECK(H5Aget_type(attr)));
  H5T_class_t c = H5_CHECK(H5Tget_class(type));
  if (c != H5T_FLOAT && c != H5T_INTEGER) bad_attr(obj, name, "is not a number");
  double v = 0;
  H5_CHECK(H5Aread(attr, H5T_NATIVE_DOUBLE, &v));
  return v;
}

namespace {

// The links on the way to `path`, outermost first: "/train/images" gives "/train", "/train/images".
std::vector<std::string> links_to(const std::string& path) {
  std::vector<std::string> links;
  size_t pos = 0;
  while (pos < path.size()) {
    size_t next = path.find('/', pos + 1);
    if (next == std::string::npos) next = path.size();
    if (std::string prefix = path.substr(0, next); prefix != "/") links.push_back(prefix);
    pos = next;
  }
  return links;
}

}  // namespace

bool h5_has_path(hid_t file, const std::string& path) {
  for (const std::string& link : links_to(path))
    if (H5_CHECK(H5Lexists(file, link.c_str(), H5P_DEFAULT)) <= 0) return false;
  return true;
}

H5Id h5_open_prepared(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw H5LayoutError("file not found");
  if (!std::filesystem::is_regular_file(path, ec)) throw H5LayoutError("is not a regular file");
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    throw H5LayoutError("is not an HDF5 file (or cannot be read)");
  }
  return H5Id(H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
}

void h5_check_layout_format(hid_t file) {
  const std::string format = h5_read_attr_str(file, layout::kAttrFormat);
  if (format != layout::kFormatName)
    throw H5LayoutError("format attribute is '" + format + "', expected '" + layout::kFormatName + "'");
  const int64_t version = h5_read_attr_i64(file, layout::kAttrFormatVersion);
  if (version != layout::kFormatVersion)
    throw H5LayoutError("format version " + std::to_string(version) + ", this build reads version " +
                        std::to_string(layout::kFormatVersion));
}

namespace {

std::string type_text(hid_t type) {
  const size_t bits = 8 * H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_INTEGER: return (H5Tget_sign(type) == H5T_SGN_2 ? "int" : "uint") + std::to_string(bits);
    case H5T_FLOAT: return "float" + std::to_string(bits);
    case H5T_STRING: return "a string";
    default: return "of another type";
  }
}

}  // namespace

namespace {

// The checks of h5_int_dataset_extents for a dataset of class `cls` (integer or float).
std::vector<hsize_t> checked_extents(hid_t file, const std::string& name, H5T_class_t cls, size_t bytes,
                                     bool is_signed, int rank) {
  auto fail = [&](const std::string& why) { throw H5LayoutError(name + " " + why); };
  if (!h5_has_path(file, name)) fail("is missing");
  // Everything must lie in this file: another file, or raw data stored outside (a pipe, a device),
  // could be anything, or never end.
  for (const std::string& link : links_to(name)) {
    H5L_info_t info;
    H5_CHECK(H5Lget_info(file, link.c_str(), &info, H5P_DEFAULT));
    if (info.type != H5L_TYPE_HARD) fail("is reached through a soft or external link (" + link + ")");
  }
  const hid_t id = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
  if (id < 0) {
    H5Eclear2(H5E_DEFAULT);
    fail("is not a dataset");
  }
  H5Id ds(id);
  H5Id type(H5_CHECK(H5Dget_type(ds)));
  const bool type_ok = H5Tget_class(type) == cls && H5Tget_size(type) == bytes &&
                       (cls != H5T_INTEGER || (H5Tget_sign(type) == H5T_SGN_2) == is_signed);
  const std::string expected =
      (cls == H5T_FLOAT ? "float" : is_signed ? "int" : "uint") + std::to_string(8 * bytes);
  if (!type_ok) fail("is " + type_text(type) + ", expected " + expected);
  H5Id space(H5_CHECK(H5Dget_space(ds)));
  const int ndims = H5_CHECK(H5Sget_simple_extent_ndims(space));
  if (ndims != rank) fail("has " + std::to_string(ndims) + " dimensions, expected " + std::to_string(rank));
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5_CHECK(H5Sget_simple_extent_dims(space, dims.data(), nullptr));
  H5Id dcpl(H5_CHECK(H5Dget_create_plist(ds)));
  const H5D_layout_t storage = H5Pget_layout(dcpl);
  if ((storage != H5D_CONTIGUOUS && storage != H5D_CHUNKED && storage != H5D_COMPACT) ||
      H5_CHECK(H5Pget_external_count(dcpl)) > 0)
    fail("is stored outside the file (external or virtual storage)");
  if (H5_CHECK(H5Pget_nfilters(dcpl)) > 0) fail("is stored compressed or filtered; the layout is uncompressed");
  hsize_t claimed = bytes;
  for (hsize_t d : dims) {
    if (d != 0 && claimed > UINT64_MAX / d) fail("claims more data than any file can hold");
    claimed *= d;
  }
  const hsize_t stored = H5Dget_storage_size(ds);
  if (stored < claimed)
    fail("claims " + std::to_string(claimed) + " bytes of data but the file holds " + std::to_string(stored));
  return dims;
}

}  // namespace

std::vector<hsize_t> h5_int_dataset_extents(hid_t file, const std::string& name, size_t bytes, bool is_signed,
                                            int rank) {
  return checked_extents(file, name, H5T_INTEGER, bytes, is_signed, rank);
}

std::vector<hsize_t> h5_float_dataset_extents(hid_t file, const std::string& name, int rank) {
  return checked_extents(file, name, H5T_FLOAT, sizeof(float), true, rank);
}

void write_h5_atomically(const std::string& out_h5, const std::function<void(const std::string& tmp_path)>& write) {
  namespace fs = std::filesystem;
  const fs::path out(out_h5);
  std::error_code ec;
  if (out.has_parent_path()) {
    fs::create_directories(out.parent_path(), ec);
    if (ec) throw UserError("cannot create directory " + out.parent_path().string() + ": " + ec.message());
  }
  const std::string tmp = out_h5 + ".tmp." + std::to_string(::getpid());
  try {
    H5Quiet quiet;
    write(tmp);
    fs::rename(tmp, out);
  } catch (const H5Error& e) {
    fs::remove(tmp, ec);
    throw UserError("cannot write " + out_h5 + ": " + e.what());
  } catch (const fs::filesystem_error& e) {
    fs::remove(tmp, ec);
    throw UserError("cannot write " + out_h5 + ": " + e.what());
  } catch (...) {
    fs::remove(tmp, ec);
    throw;
  }
}

}  // namespace mlpd
