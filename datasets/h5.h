// HDF5 helpers shared by the dataset readers and writers: every HDF5 call goes through H5_CHECK
// (which names file:line, the call and HDF5's own message), every hid_t is owned by an H5Id.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace mlpd {

// A failed HDF5 call. Callers that face the user (loaders, converters) turn it into a UserError
// that names the file and what to do.
struct H5Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The file is readable HDF5 but not in the layout its reader expects (datasets/README.md): an
// object missing, of the wrong type or shape, or claiming more data than the file holds. The
// message names the object ("/eval/images ...", "attribute 'mean' of /train ...").
struct H5LayoutError : H5Error {
  using H5Error::H5Error;
};

// Throws H5Error "file:line: <call> failed: <HDF5's message>" and clears HDF5's error stack.
[[noreturn]] void h5_fail(const char* call, const char* file, int line);

template <class T>
inline T h5_check(T status, const char* call, const char* file, int line) {
  if (status < 0) h5_fail(call, file, line);
  return status;
}

}  // namespace mlpd

// Checks an HDF5 call (herr_t, hid_t or htri_t: negative means failure) and returns its value.
#define H5_CHECK(call) ::mlpd::h5_check((call), #call, __FILE__, __LINE__)

namespace mlpd {

// Owns one HDF5 identifier (file, group, dataset, dataspace, datatype, property list, attribute)
// and closes it when it goes out of scope. close() closes now and reports failure (use it for a
// file being written, whose close flushes); the destructor ignores errors.
class H5Id {
 public:
  H5Id() = default;
  explicit H5Id(hid_t id) : id_(id) {}
  ~H5Id() { release(); }
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  H5Id(H5Id&& o) noexcept : id_(o.id_) { o.id_ = H5I_INVALID_HID; }
  H5Id& operator=(H5Id&& o) noexcept {
    if (this != &o) {
      release();
      id_ = o.id_;
      o.id_ = H5I_INVALID_HID;
    }
    return *this;
  }
  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }  // NOLINT: passes straight into the C API
  void close();

 private:
  void release() noexcept;
  hid_t id_ = H5I_INVALID_HID;
};

// While alive, HDF5 prints nothing on stderr (H5Eset_auto2 off): errors reach the user through
// H5_CHECK's exception instead. Restores the previous handler on exit.
class H5Quiet {
 public:
  H5Quiet();
  ~H5Quiet();
  H5Quiet(const H5Quiet&) = delete;
  H5Quiet& operator=(const H5Quiet&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

// Scalar attributes on a file, group or dataset.
void h5_write_attr_str(hid_t obj, const char* name, const std::string& value);
void h5_write_attr_i64(hid_t obj, const char* name, int64_t value);
void h5_write_attr_f64(hid_t obj, const char* name, double value);
bool h5_has_attr(hid_t obj, const char* name);
// Readers throw H5LayoutError naming the attribute and its object when it is missing, not a scalar
// or of the wrong kind.
std::string h5_read_attr_str(hid_t obj, const char* name);  // fixed- or variable-length
int64_t h5_read_attr_i64(hid_t obj, const char* name);
// An integer attribute that must lie in [lo, hi] (a count or size a reader will allocate by).
int64_t h5_read_attr_i64_within(hid_t obj, const char* name, int64_t lo, int64_t hi);
double h5_read_attr_f64(hid_t obj, const char* name);
// True when `path` (e.g. "/train/images") exists, checking each component in turn.
bool h5_has_path(hid_t file, const std::string& path);

// Opens a prepared file read-only. H5LayoutError when it is missing, not a regular file or not
// HDF5 at all. Call with an H5Quiet alive.
H5Id h5_open_prepared(const std::string& path);

// Checks the root attributes format and format_version name the layout this build reads
// (datasets/layout.h); H5LayoutError otherwise, asking for a re-prepare.
void h5_check_layout_format(hid_t file);

// The extents of dataset `name` (e.g. "/train/labels") once its header has been checked against
// what a loader will read: integers `bytes` wide, signed or not as asked, with `rank` dimensions,
// stored uncompressed and in full. The last check bounds every allocation by the file's own size:
// a crafted header cannot claim a billion samples in a file of a few kilobytes. H5LayoutError
// naming the dataset otherwise.
std::vector<hsize_t> h5_int_dataset_extents(hid_t file, const std::string& name, size_t bytes, bool is_signed,
                                            int rank);
// The same for a float32 dataset.
std::vector<hsize_t> h5_float_dataset_extents(hid_t file, const std::string& name, int rank);

// Writes a prepared file safely: creates the output directory, calls write(tmp_path) with HDF5's
// error printing off, then renames tmp to out_h5. Never leaves a half-written file under the final
// name; on failure removes the temporary and throws a UserError naming out_h5.
void write_h5_atomically(const std::string& out_h5, const std::function<void(const std::string& tmp_path)>& write);

}  // namespace mlpd
