// Fuzzes the prepared-data openers: the image-split loader (datasets/image_dataset.h, whole split
// and a rank's rows), the MovieLens loader (datasets/movielens.h) and every workload's check_data
// hook, on an HDF5 file written from the fuzz input by h5_file_gen.h (a structured generator: see
// there why). The input's last bytes pick the scale, which readers open the file (the file's own
// workload, a rank's rows, or the other workload's) and the rows asked for; the rest builds the file.
//
// A UserError naming the file is the expected answer to a bad file; any other exception, a crash,
// a leak, UB, an allocation the file's own bytes do not justify (libFuzzer's -malloc_limit_mb), or
// a loaded split that contradicts itself is a bug.
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/check.h"
#include "datasets/image_dataset.h"
#include "datasets/movielens.h"
#include "h5_file_gen.h"
#include "mlperf/keys.h"
#include "scratch.h"
#include "workloads/registry.h"

namespace {

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "h5_fuzz: %s\n", what);
  std::abort();
}

// MLPD_FUZZ_VERBOSE=1 prints each reader's answer: to see what a corpus input reaches.
const bool kVerbose = std::getenv("MLPD_FUZZ_VERBOSE") != nullptr;

template <class F>
void expect_user_error_or_success(F load) {
  try {
    load();
    if (kVerbose) std::fprintf(stderr, "h5_fuzz: loaded\n");
  } catch (const mlpd::UserError& e) {
    if (kVerbose) std::fprintf(stderr, "h5_fuzz: UserError: %s\n", e.what());
  }
}

void check_split(const mlpd::ImageSplit& s) {
  const size_t per = static_cast<size_t>(s.h) * static_cast<size_t>(s.w) * static_cast<size_t>(s.c);
  if (s.count < 0 || s.pixels.size() != static_cast<size_t>(s.count) * per ||
      s.labels.size() != static_cast<size_t>(s.count))
    bug("loaded split: sizes disagree with count and shape");
  for (int32_t l : s.labels)
    if (l < 0 || l >= s.num_classes) bug("loaded split: a label outside [0, num_classes)");
}

// The workloads' check_data hooks find their file by name in the data directory: one link per
// workload and scale to the file the input was written to.
void link_workload_files(const std::filesystem::path& target) {
  for (const mlpd::WorkloadEntry* e : mlpd::workload_entries())
    for (const auto& scale : e->spec.scales) {
      const std::filesystem::path link =
          mlpd::workload_data_path(mlpd::fuzz::scratch_dir().string(), e->spec.name, scale.name);
      std::error_code ec;
      if (!std::filesystem::is_symlink(link, ec)) std::filesystem::create_symlink(target, link);
    }
}

// What an input opens its file with. Each HDF5 open costs milliseconds (libhdf5's metadata cache
// is allocated afresh), so one input runs one group of readers, picked by the input itself.
enum Readers { kOwn = 0, kRows = 1, kOther = 2, kAll = 3 };

void run_workload(const std::string& name, const std::string& path, const std::string& scale) {
  const mlpd::WorkloadEntry& e = mlpd::find_workload(name);
  const mlpd::WorkloadContext ctx{0, 1, scale, mlpd::fuzz::scratch_dir().string()};
  if (e.check_data) expect_user_error_or_success([&] { e.check_data(ctx); });
  if (name == mlpd::keys::kNcf) {
    expect_user_error_or_success([&] {
      const mlpd::MovieLensData d = mlpd::load_movielens(path, scale);
      if (d.eval_items.size() != static_cast<size_t>(d.num_users) || d.train_users.size() != d.train_items.size())
        bug("load_movielens: sizes disagree with num_users");
    });
  } else {
    for (const char* split : {"train", "eval"})
      expect_user_error_or_success([&] { check_split(mlpd::load_image_split(path, split)); });
  }
}

void run_rows(const std::string& path, int64_t begin, int64_t count) {
  for (const char* split : {"train", "eval"})
    expect_user_error_or_success([&] {
      const mlpd::ImageSplit s = mlpd::load_image_rows(path, split, begin, count);
      if (s.count != count) bug("load_image_rows: a slice of another length than asked");
      check_split(s);
    });
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // the generator's refusals are not news
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider f(data, size);
  const std::string scale = f.ConsumeBool() ? "reference" : "mini";
  const auto readers = static_cast<Readers>(f.ConsumeIntegralInRange<int>(0, 3));
  const int64_t begin = f.PickValueInArray<int64_t>({0, 1, 2, -1, 5, INT64_MAX});
  const int64_t count = f.PickValueInArray<int64_t>({1, 0, 2, 3, -1, INT64_MAX, 1 << 20});
  const std::filesystem::path path = mlpd::fuzz::scratch_dir() / "data.h5";
  std::string written_for;
  try {
    written_for = mlpd::fuzz::H5FileGen(f).write(path.string(), scale);
  } catch (const mlpd::fuzz::Skip&) {
    return 0;
  }
  link_workload_files(path);
  const std::string other = written_for == mlpd::keys::kNcf ? mlpd::keys::kResnet : mlpd::keys::kNcf;
  if (readers == kOwn || readers == kAll) run_workload(written_for, path.string(), scale);
  if (readers == kRows || readers == kAll) run_rows(path.string(), begin, count);
  if (readers == kOther || readers == kAll) run_workload(other, path.string(), scale);
  return 0;
}
