// Crafting prepared files for the tests of hostile input: valid small files in the layout of
// datasets/README.md, and the edits that break one thing in them (a dataset replaced by one of
// another type or shape, an attribute rewritten). Used by crafted_files_test.cpp and by the
// craft_eval_shape helper of tests/cli/crafted_data.sh.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "datasets/h5.h"
#include "datasets/layout.h"

namespace mlpd::craft {

// Replaces dataset `name` (created if absent) by one of `type` and extents `dims`, filled with
// 0, 1, 2, ... modulo `modulo` when `write` (else never written: the file holds none of it).
// chunk_rows > 0 makes it chunked along the first dimension, as the image layout is.
inline void replace_dataset(hid_t file, const std::string& name, hid_t type, const std::vector<hsize_t>& dims,
                            bool write = true, int64_t modulo = 256, hsize_t chunk_rows = 0) {
  if (h5_has_path(file, name)) H5_CHECK(H5Ldelete(file, name.c_str(), H5P_DEFAULT));
  H5Id space(H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)));
  H5Id dcpl(H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
  if (chunk_rows > 0) {
    std::vector<hsize_t> chunk = dims;
    chunk[0] = chunk_rows;
    H5_CHECK(H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data()));
  }
  H5Id lcpl(H5_CHECK(H5Pcreate(H5P_LINK_CREATE)));
  H5_CHECK(H5Pset_create_intermediate_group(lcpl, 1));
  H5Id ds(H5_CHECK(H5Dcreate2(file, name.c_str(), type, space, lcpl, dcpl, H5P_DEFAULT)));
  if (!write) return;
  size_t n = 1;
  for (hsize_t d : dims) n *= static_cast<size_t>(d);
  std::vector<int64_t> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = static_cast<int64_t>(i) % modulo;
  if (n > 0) H5_CHECK(H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()));
}

inline void replace_attr_i64(hid_t obj, const char* name, int64_t value) {
  if (h5_has_attr(obj, name)) H5_CHECK(H5Adelete(obj, name));
  h5_write_attr_i64(obj, name, value);
}

inline void replace_attr_f64(hid_t obj, const char* name, double value) {
  if (h5_has_attr(obj, name)) H5_CHECK(H5Adelete(obj, name));
  h5_write_attr_f64(obj, name, value);
}

// Runs edit(file) on a prepared file opened for writing.
template <class Edit>
void edit_file(const std::string& path, Edit edit) {
  H5Id file(H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)));
  edit(file.get());
  file.close();
}

// Makes split `split` claim n rows it never wrote: each of its `datasets` replaced by an unwritten,
// chunked one of n rows (type and row shape kept), its count attribute set to n. A header that
// claims gigabytes in a file of kilobytes.
inline void claim_unwritten_rows(hid_t file, const std::string& split, hsize_t n,
                                 const std::vector<std::string>& datasets) {
  for (const std::string& name : datasets) {
    const std::string path = "/" + split + "/" + name;
    H5Id old(H5_CHECK(H5Dopen2(file, path.c_str(), H5P_DEFAULT)));
    H5Id type(H5_CHECK(H5Dget_type(old)));
    H5Id space(H5_CHECK(H5Dget_space(old)));
    std::vector<hsize_t> dims(static_cast<size_t>(H5_CHECK(H5Sget_simple_extent_ndims(space))));
    H5_CHECK(H5Sget_simple_extent_dims(space, dims.data(), nullptr));
    old.close();
    dims[0] = n;
    replace_dataset(file, path, type, dims, false, 1, 1024);
  }
  H5Id group(H5_CHECK(H5Gopen2(file, split.c_str(), H5P_DEFAULT)));
  replace_attr_i64(group, layout::kAttrCount, static_cast<int64_t>(n));
}

// One split of an image file: uint8 images [n, side, side, 1], int32 labels [n] (i mod classes),
// and the split's attributes.
inline void write_image_split(hid_t file, const std::string& split, hsize_t n, hsize_t side, int64_t classes) {
  replace_dataset(file, "/" + split + "/" + layout::kImages, H5T_STD_U8LE, {n, side, side, 1}, true, 256, 2);
  replace_dataset(file, "/" + split + "/" + layout::kLabels, H5T_STD_I32LE, {n}, true, classes);
  H5Id group(H5_CHECK(H5Gopen2(file, split.c_str(), H5P_DEFAULT)));
  h5_write_attr_i64(group, layout::kAttrCount, static_cast<int64_t>(n));
  h5_write_attr_i64(group, layout::kAttrHeight, static_cast<int64_t>(side));
  h5_write_attr_i64(group, layout::kAttrWidth, static_cast<int64_t>(side));
  h5_write_attr_i64(group, layout::kAttrChannels, 1);
}

// A new file with the root attributes every prepared file carries.
inline H5Id create_prepared_file(const std::string& path, const char* benchmark) {
  H5Id file(H5_CHECK(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)));
  h5_write_attr_str(file, layout::kAttrFormat, layout::kFormatName);
  h5_write_attr_i64(file, layout::kAttrFormatVersion, layout::kFormatVersion);
  h5_write_attr_str(file, layout::kAttrBenchmark, benchmark);
  h5_write_attr_str(file, layout::kAttrScale, "mini");
  return file;
}

// A valid image file: 6 train and 4 eval samples of 4x4x1, 3 classes.
inline void write_image_file(const std::string& path) {
  H5Id file = create_prepared_file(path, "resnet");
  h5_write_attr_i64(file, layout::kAttrNumClasses, 3);
  write_image_split(file, layout::kTrain, 6, 4, 3);
  write_image_split(file, layout::kEval, 4, 4, 3);
  H5Id train(H5_CHECK(H5Gopen2(file, layout::kTrain, H5P_DEFAULT)));
  h5_write_attr_f64(train, layout::kAttrMean, 0.25);
  h5_write_attr_f64(train, layout::kAttrStd, 0.5);
  train.close();
  file.close();
}

// Gives the eval split of an image file samples of height x width (same count, same channels,
// attributes to match): the one defect left is the shape differing from the training samples'.
inline void give_eval_samples_shape(const std::string& path, hsize_t height, hsize_t width) {
  edit_file(path, [&](hid_t file) {
    const std::string images = std::string("/") + layout::kEval + "/" + layout::kImages;
    H5Id old(H5_CHECK(H5Dopen2(file, images.c_str(), H5P_DEFAULT)));
    H5Id space(H5_CHECK(H5Dget_space(old)));
    hsize_t dims[4] = {0, 0, 0, 0};
    H5_CHECK(H5Sget_simple_extent_dims(space, dims, nullptr));
    old.close();
    replace_dataset(file, images, H5T_STD_U8LE, {dims[0], height, width, dims[3]}, true, 256, 1);
    H5Id group(H5_CHECK(H5Gopen2(file, layout::kEval, H5P_DEFAULT)));
    replace_attr_i64(group, layout::kAttrHeight, static_cast<int64_t>(height));
    replace_attr_i64(group, layout::kAttrWidth, static_cast<int64_t>(width));
  });
}

// A valid ncf file: 3 users, 6 items, 2 evaluation negatives per user, 5 training positives.
inline void write_ncf_file(const std::string& path) {
  H5Id file = create_prepared_file(path, "ncf");
  h5_write_attr_i64(file, "num_users", 3);
  h5_write_attr_i64(file, "num_items", 6);
  h5_write_attr_i64(file, "eval_negatives", 2);
  replace_dataset(file, "/train/users", H5T_STD_I32LE, {5}, true, 3);
  replace_dataset(file, "/train/items", H5T_STD_I32LE, {5}, true, 6);
  replace_dataset(file, "/eval/items", H5T_STD_I32LE, {3}, true, 6);
  replace_dataset(file, "/eval/negatives", H5T_STD_I32LE, {3, 2}, true, 6);
  H5Id train(H5_CHECK(H5Gopen2(file, layout::kTrain, H5P_DEFAULT)));
  h5_write_attr_i64(train, layout::kAttrCount, 5);
  train.close();
  file.close();
}

}  // namespace mlpd::craft
