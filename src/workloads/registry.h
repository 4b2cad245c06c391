// The list of workloads. Each workload folder defines one WorkloadEntry (its spec for the MLPerf
// side, its converter for `prepare`, its factory); registry.cpp lists them. `train`, `prepare`,
// `rules`, `check`, `--help` and the error for an unknown benchmark all read this list, so adding a
// workload is one new folder plus one line there.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mlperf/benchmark_spec.h"
#include "workloads/workload.h"

namespace mlpd {

struct PrepareRequest {
  std::string scale = "mini";
  std::string from;    // the raw data (a file or directory); "" for the scale's default source
  std::string output;  // the HDF5 file to write
  // Translation (gnmt, transformer): plain-text parallel files, one sentence a line (reference
  // scale: the training corpus, and the held-out test pair, e.g. newstest2014; without the test
  // pair the workload's split rule applies); vocab_size: BPE symbols, 0 for the scale's default.
  std::string from_parallel_src, from_parallel_tgt, test_parallel_src, test_parallel_tgt;
  int vocab_size = 0;
  // Detection (ssd) at reference scale: the COCO 2017 directory, and the square size its images
  // are resized to (0: the workload's).
  std::string coco_dir;
  int image_size = 0;
};

struct WorkloadEntry {
  BenchmarkSpec spec;
  std::string prepare_help;  // what `prepare --from` means for this workload
  // Writes the prepared dataset (atomically); null when the workload needs no prepared data.
  void (*prepare)(const PrepareRequest& request) = nullptr;
  // Checks what the rules table cannot express (a list's shape) by reading the typed config;
  // UserError (exit 2). Runs with the rules, before any file is opened. Null: nothing more.
  void (*check_config)(const nlohmann::json& config) = nullptr;
  // Checks the prepared data (present, shapes and dtypes consistent across splits, counts, labels
  // in range) without loading it; UserError (exit 2) naming the file and dataset. Runs on every
  // rank before any result file is opened. Null: no data to check.
  void (*check_data)(const WorkloadContext& ctx) = nullptr;
  // Builds the workload for this rank from the resolved, rule-checked config. Outside the timed region.
  std::unique_ptr<Workload> (*make)(const WorkloadContext& ctx, const nlohmann::json& config) = nullptr;
};

const std::vector<const WorkloadEntry*>& workload_entries();
// The entry named `name`; UserError (exit 2) naming the available ones when there is none.
const WorkloadEntry& find_workload(const std::string& name);
// nullptr when unknown: the lookup `check` uses.
const BenchmarkSpec* find_benchmark_spec(const std::string& name);
std::vector<std::string> workload_names();
// Adds an entry (tests, out-of-tree workloads): the same list every command reads. Call before
// parsing the command line. A second entry with an existing name is an error.
void register_workload(const WorkloadEntry& entry);

// Path of a workload's prepared dataset under the data directory.
std::string workload_data_path(const std::string& data_dir, const std::string& benchmark, const std::string& scale);

}  // namespace mlpd
