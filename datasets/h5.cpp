#include "datasets/h5.h"
#include "core/check.h"
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

H5Id open_attr(hid_t obj, const char* name) {
  if (!h5_has_attr(obj, name)) throw H5Error(std::string("attribute '") + name + "' is missing");
  return H5Id(H5_CHECK(H5Aopen(obj, name, H5P_DEFAULT)));
}

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
  H5Id attr = open_attr(obj, name);
  H5Id type(H5_CHECK(H5Aget_type(attr)));
  if (H5_CHECK(H5Tget_class(type)) != H5T_STRING)
    throw H5Error(std::string("attribute '") + name + "' is not a string");
  H5Id space(H5_CHECK(H5Aget_space(attr)));
  if (H5_CHECK(H5Sget_simple_extent_npoints(space)) != 1)
    throw H5Error(std::string("attribute '") + name + "' is not a scalar");
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
  std::vector<char> buf(n + 1, '\0');
  H5_CHECK(H5Aread(attr, type, buf.data()));
  return std::string(buf.data());  // stops at the first NUL (null-terminated or null-padded)
}

int64_t h5_read_attr_i64(hid_t obj, const char* name) {
  H5Id attr = open_attr(obj, name);
  H5Id type(H5_CHECK(H5Aget_type(attr)));
  if (H5_CHECK(H5Tget_class(type)) != H5T_INTEGER)
    throw H5Error(std::string("attribute '") + name + "' is not an integer");
  int64_t v = 0;
  H5_CHECK(H5Aread(attr, H5T_NATIVE_INT64, &v));
  return v;
}

double h5_read_attr_f64(hid_t obj, const char* name) {
  H5Id attr = open_attr(obj, name);
  H5Id type(H5_CHECK(H5Aget_type(attr)));
  H5T_class_t c = H5_CHECK(H5Tget_class(type));
  if (c != H5T_FLOAT && c != H5T_INTEGER)
    throw H5Error(std::string("attribute '") + name + "' is not a number");
  double v = 0;
  H5_CHECK(H5Aread(attr, H5T_NATIVE_DOUBLE, &v));
  return v;
}

bool h5_has_path(hid_t file, const std::string& path) {
  std::string prefix;
  size_t pos = 0;
  while (pos < path.size()) {
    size_t next = path.find('/', pos + 1);
    if (next == std::string::npos) next = path.size();
    prefix = path.substr(0, next);
    if (prefix != "/" && H5_CHECK(H5Lexists(file, prefix.c_str(), H5P_DEFAULT)) <= 0) return false;
    pos = next;
  }
  return true;
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
