// Crafted prepared files, one class of defect each: the check a run makes before it writes
// anything (check_image_dataset, check_movielens, through WorkloadEntry::check_data) refuses them
// with a UserError of exit code 2 naming the file and the dataset or attribute at fault, and the
// loaders refuse them too: nothing crashes, nothing allocates what a header merely claims.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>

#include "core/check.h"
#include "datasets/image_dataset.h"
#include "datasets/movielens.h"
#include "h5_craft.h"
#include "temp_dir.h"
#include "workloads/registry.h"

using namespace mlpd;
using namespace mlpd::craft;
namespace fs = std::filesystem;

namespace {

// f must throw a UserError of exit code 2 whose message names `path` and contains `part`.
void expect_refused(const std::function<void()>& f, const std::string& path, const std::string& part) {
  try {
    f();
  } catch (const UserError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.exit_code, 2) << msg;
    EXPECT_NE(msg.find(path), std::string::npos) << "the file is not named: " << msg;
    EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' is not named: " << msg;
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a UserError naming '" << part << "', got: " << e.what();
    return;
  }
  ADD_FAILURE() << "accepted a file that should be refused for '" << part << "'";
}

// The run's check and both loaders refuse the image file.
void expect_image_refused(const std::string& path, const std::string& part) {
  expect_refused([&] { check_image_dataset(path); }, path, part);
  expect_refused([&] { load_image_split(path, "eval"); }, path, part);
  expect_refused([&] { load_image_rows(path, "train", 0, 1); }, path, part);
}

void expect_ncf_refused(const std::string& path, const std::string& part) {
  expect_refused([&] { check_movielens(path, "mini"); }, path, part);
  expect_refused([&] { load_movielens(path, "mini"); }, path, part);
}

// A valid file in `d`, then `edit` applied to it; returns its path.
template <class Edit>
std::string crafted_image_file(const TempDir& d, Edit edit) {
  const std::string path = d / "resnet_mini.h5";
  write_image_file(path);
  edit_file(path, edit);
  return path;
}

template <class Edit>
std::string crafted_ncf_file(const TempDir& d, Edit edit) {
  const std::string path = d / "ncf_mini.h5";
  write_ncf_file(path);
  edit_file(path, edit);
  return path;
}

void no_edit(hid_t) {}

}  // namespace

TEST(CraftedImageFile, the_valid_file_passes_the_check_and_loads) {
  TempDir d;
  const std::string path = crafted_image_file(d, no_edit);
  EXPECT_NO_THROW(check_image_dataset(path));
  const ImageSplit eval = load_image_split(path, "eval");
  EXPECT_EQ(eval.count, 4);
  EXPECT_EQ(eval.h, 4);
  EXPECT_EQ(eval.num_classes, 3);
}

TEST(CraftedImageFile, missing_or_not_hdf5_is_refused_with_exit_code_2) {
  TempDir d;
  expect_image_refused(d / "absent.h5", "file not found");
  const std::string junk = d / "junk.h5";
  std::ofstream(junk) << "not HDF5 at all";
  expect_image_refused(junk, "not an HDF5 file");
  fs::create_directories(d / "dir.h5");
  expect_image_refused(d / "dir.h5", "not a regular file");
}

TEST(CraftedImageFile, eval_samples_of_another_shape_are_refused_before_evaluation_overflows) {
  TempDir d;
  const std::string path = crafted_image_file(d, no_edit);
  give_eval_samples_shape(path, 5, 5);
  expect_image_refused(path, "/eval/images samples are 5x5x1 but /train/images samples are 4x4x1");
}

TEST(CraftedImageFile, a_missing_dataset_is_named) {
  TempDir d;
  expect_image_refused(crafted_image_file(d, [](hid_t f) { H5_CHECK(H5Ldelete(f, "/eval/labels", H5P_DEFAULT)); }),
                       "/eval/labels is missing");
}

TEST(CraftedImageFile, images_of_another_dtype_are_refused_not_converted) {
  TempDir d;
  expect_image_refused(
      crafted_image_file(d, [](hid_t f) { replace_dataset(f, "/train/images", H5T_STD_U16LE, {6, 4, 4, 1}); }),
      "/train/images is uint16, expected uint8");
}

TEST(CraftedImageFile, labels_of_another_dtype_or_rank_are_refused) {
  TempDir d;
  expect_image_refused(
      crafted_image_file(d, [](hid_t f) { replace_dataset(f, "/eval/labels", H5T_IEEE_F32LE, {4}, true, 3); }),
      "/eval/labels is float32, expected int32");
  expect_image_refused(
      crafted_image_file(d, [](hid_t f) { replace_dataset(f, "/eval/labels", H5T_STD_I32LE, {4, 1}, true, 3); }),
      "/eval/labels has 2 dimensions, expected 1");
}

TEST(CraftedImageFile, more_labels_than_images_is_refused) {
  TempDir d;
  expect_image_refused(
      crafted_image_file(d, [](hid_t f) { replace_dataset(f, "/train/labels", H5T_STD_I32LE, {7}, true, 3); }),
      "/train/images has 6 images but /train/labels has 7 labels");
}

TEST(CraftedImageFile, a_label_outside_the_classes_is_refused_by_the_check) {
  TempDir d;
  const std::string path =
      crafted_image_file(d, [](hid_t f) { replace_dataset(f, "/eval/labels", H5T_STD_I32LE, {4}, true, 4); });
  // The training loader reads only its own split; the run's check reads every label.
  expect_refused([&] { check_image_dataset(path); }, path, "/eval/labels holds label 3 at row 3, outside [0, 3)");
}

TEST(CraftedImageFile, attributes_that_disagree_with_the_datasets_are_refused) {
  TempDir d;
  expect_image_refused(crafted_image_file(d,
                                          [](hid_t f) {
                                            H5Id g(H5_CHECK(H5Gopen2(f, "/eval", H5P_DEFAULT)));
                                            replace_attr_i64(g, layout::kAttrCount, 1000000);
                                          }),
                       "/eval attribute count is 1000000 but /eval/images holds 4");
}

TEST(CraftedImageFile, fewer_than_two_classes_is_refused) {
  TempDir d;
  expect_image_refused(crafted_image_file(d,
                                          [](hid_t f) {
                                            replace_attr_i64(f, layout::kAttrNumClasses, 1);
                                            replace_dataset(f, "/eval/labels", H5T_STD_I32LE, {4}, true, 1);
                                            replace_dataset(f, "/train/labels", H5T_STD_I32LE, {6}, true, 1);
                                          }),
                       "attribute 'num_classes' of / is 1, outside [2, ");
}

TEST(CraftedImageFile, mean_and_std_that_are_not_pixel_statistics_are_refused) {
  for (double bad_std : {std::numeric_limits<double>::infinity(), std::nan(""), 0.0, -1.0}) {
    TempDir d;
    expect_image_refused(crafted_image_file(d,
                                            [&](hid_t f) {
                                              H5Id g(H5_CHECK(H5Gopen2(f, "/train", H5P_DEFAULT)));
                                              replace_attr_f64(g, layout::kAttrStd, bad_std);
                                            }),
                         "/train attributes mean");
  }
}

TEST(CraftedImageFile, an_array_where_a_scalar_attribute_belongs_is_refused_not_read_past) {
  TempDir d;
  const std::string path = crafted_image_file(d, [](hid_t f) {
    H5_CHECK(H5Adelete(f, layout::kAttrNumClasses));
    const hsize_t n = 4096;
    std::vector<int64_t> values(n, 3);
    H5Id space(H5_CHECK(H5Screate_simple(1, &n, nullptr)));
    H5Id attr(H5_CHECK(H5Acreate2(f, layout::kAttrNumClasses, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT)));
    H5_CHECK(H5Awrite(attr, H5T_NATIVE_INT64, values.data()));
  });
  expect_image_refused(path, "attribute 'num_classes' of / is not a scalar");
}

TEST(CraftedImageFile, a_header_claiming_more_samples_than_the_file_holds_allocates_nothing) {
  TempDir d;
  // 2^28 samples of 4x4: 4 GiB of pixels.
  const std::string path = crafted_image_file(
      d, [](hid_t f) { claim_unwritten_rows(f, layout::kTrain, hsize_t{1} << 28, {layout::kImages, layout::kLabels}); });
  ASSERT_LT(fs::file_size(path), 1u << 20);
  expect_image_refused(path, "/train/images claims 4294967296 bytes of data but the file holds 0");
}

TEST(CraftedImageFile, data_outside_the_file_is_refused_not_read) {
  TempDir d;
  const std::string outside = d / "outside.bin";  // could as well be a pipe that never ends
  std::ofstream(outside) << std::string(96, 'x');
  expect_image_refused(crafted_image_file(d,
                                          [&](hid_t f) {
                                            H5_CHECK(H5Ldelete(f, "/train/images", H5P_DEFAULT));
                                            const hsize_t dims[4] = {6, 4, 4, 1};
                                            H5Id space(H5_CHECK(H5Screate_simple(4, dims, nullptr)));
                                            H5Id dcpl(H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
                                            H5_CHECK(H5Pset_external(dcpl, outside.c_str(), 0, 96));
                                            H5Id ds(H5_CHECK(H5Dcreate2(f, "/train/images", H5T_STD_U8LE, space,
                                                                        H5P_DEFAULT, dcpl, H5P_DEFAULT)));
                                          }),
                       "/train/images is stored outside the file");
  const std::string other = d / "other.h5";
  write_image_file(other);
  expect_image_refused(crafted_image_file(d,
                                          [&](hid_t f) {
                                            H5_CHECK(H5Ldelete(f, "/eval/labels", H5P_DEFAULT));
                                            H5_CHECK(H5Lcreate_external(other.c_str(), "/eval/labels", f,
                                                                        "/eval/labels", H5P_DEFAULT, H5P_DEFAULT));
                                          }),
                       "/eval/labels is reached through a soft or external link");
}

TEST(CraftedImageFile, the_resnet_entry_checks_its_data_before_a_run_writes_anything) {
  TempDir d;
  give_eval_samples_shape(crafted_image_file(d, no_edit), 5, 5);
  const WorkloadEntry& resnet = find_workload("resnet");
  ASSERT_NE(resnet.check_data, nullptr);
  expect_refused([&] { resnet.check_data(WorkloadContext{0, 1, "mini", d.path.string()}); }, d / "resnet_mini.h5",
                 "/eval/images samples are 5x5x1");
}

TEST(CraftedNcfFile, the_valid_file_passes_the_check_and_loads) {
  TempDir d;
  const std::string path = crafted_ncf_file(d, no_edit);
  EXPECT_NO_THROW(check_movielens(path, "mini"));
  const MovieLensData m = load_movielens(path, "mini");
  EXPECT_EQ(m.num_users, 3);
  EXPECT_EQ(m.eval_negs.size(), 6u);
}

TEST(CraftedNcfFile, missing_or_not_hdf5_is_refused_with_exit_code_2) {
  TempDir d;
  expect_ncf_refused(d / "absent.h5", "file not found");
  const std::string junk = d / "junk.h5";
  std::ofstream(junk) << "not HDF5 at all";
  expect_ncf_refused(junk, "not an HDF5 file");
}

TEST(CraftedNcfFile, eval_negatives_of_another_shape_are_refused) {
  TempDir d;
  expect_ncf_refused(
      crafted_ncf_file(d, [](hid_t f) { replace_dataset(f, "/eval/negatives", H5T_STD_I32LE, {3, 3}, true, 6); }),
      "/eval/negatives is [3, 3], the attributes say [3, 2]");
}

TEST(CraftedNcfFile, ids_of_another_dtype_are_refused_not_converted) {
  TempDir d;
  expect_ncf_refused(
      crafted_ncf_file(d, [](hid_t f) { replace_dataset(f, "/train/items", H5T_IEEE_F64LE, {5}, true, 6); }),
      "/train/items is float64, expected int32");
}

TEST(CraftedNcfFile, an_id_out_of_range_is_named_with_its_dataset) {
  TempDir d;
  expect_ncf_refused(
      crafted_ncf_file(d, [](hid_t f) { replace_dataset(f, "/train/users", H5T_STD_I32LE, {5}, true, 5); }),
      "/train/users holds id 3 at index 3, outside [0, 3)");
}

TEST(CraftedNcfFile, more_items_than_the_file_has_ratings_is_refused_before_the_model_is_sized) {
  TempDir d;
  expect_ncf_refused(crafted_ncf_file(d, [](hid_t f) { replace_attr_i64(f, "num_items", 2000000000); }),
                     "attribute num_items is 2000000000 but the file holds only 8 ratings");
}

TEST(CraftedNcfFile, as_many_eval_negatives_as_items_is_refused) {
  TempDir d;
  expect_ncf_refused(crafted_ncf_file(d,
                                      [](hid_t f) {
                                        replace_attr_i64(f, "eval_negatives", 6);
                                        replace_dataset(f, "/eval/negatives", H5T_STD_I32LE, {3, 6}, true, 6);
                                      }),
                     "attribute 'eval_negatives' of / is 6, outside [1, 5]");
}

TEST(CraftedNcfFile, a_header_claiming_more_positives_than_the_file_holds_allocates_nothing) {
  TempDir d;
  // 2^29 positives: 2 GiB of int32 ids per dataset.
  const std::string path =
      crafted_ncf_file(d, [](hid_t f) { claim_unwritten_rows(f, layout::kTrain, hsize_t{1} << 29, {"users", "items"}); });
  ASSERT_LT(fs::file_size(path), 1u << 20);
  expect_ncf_refused(path, "/train/users claims 2147483648 bytes of data but the file holds 0");
}

TEST(CraftedNcfFile, the_ncf_entry_checks_its_data_before_a_run_writes_anything) {
  TempDir d;
  const std::string path =
      crafted_ncf_file(d, [](hid_t f) { replace_dataset(f, "/eval/negatives", H5T_STD_I32LE, {3, 3}, true, 6); });
  const WorkloadEntry& ncf = find_workload("ncf");
  ASSERT_NE(ncf.check_data, nullptr);
  expect_refused([&] { ncf.check_data(WorkloadContext{0, 1, "mini", d.path.string()}); }, path, "/eval/negatives");
}
