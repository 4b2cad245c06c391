// A results folder as data: results/<system>/<benchmark>/result_<N>.txt read into one record per
// run (its check verdict, what it trained, its eval curve, its throughput) and scored per
// benchmark by MLPerf's olympic mean. `check` (a folder), `suite` and `report` all read this.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mlperf/benchmark_spec.h"
#include "mlperf/check.h"

namespace mlpd {

struct EvalPoint {
  double seconds = 0.0;  // since run_start
  double epoch = 0.0;    // the eval's epoch_num
  double value = 0.0;    // the metric (eval_accuracy; with parts, the first)
  std::vector<double> values;  // every part (the metric alone without parts)
};

// What a run reports beside the MLLOG keys (the mlperf_dist_run_summary event, logged just before
// run_stop by our trainer; absent in logs from elsewhere).
struct RunStats {
  double throughput = 0.0;    // work per second, all ranks, train steps only
  std::string work_unit;      // "samples", "images", "tokens"
  double comm_share = 0.0;    // share of step time waiting for gradient communication
  double mean_step_ms = 0.0;
  int64_t steps = 0;
  int ranks = 0;
  int nodes = 0;
  std::string device;         // "cpu", "cuda"
  std::string precision = "fp32";  // --precision: "fp32", "bf16" (logs from before it: fp32)
};

struct RunRecord {
  std::string path;
  int index = -1;             // N of result_N.txt
  CheckReport check;          // the verdict of check_result_file (benchmark, scale, status, ...)
  std::optional<uint64_t> seed;
  std::optional<int64_t> global_batch;
  std::optional<double> epochs_to_target;  // epoch_num of the first eval that met the target
  std::vector<EvalPoint> evals;
  std::optional<RunStats> stats;
  double target = 0.0;        // the quality target the run was checked against
  bool converged() const { return check.converged; }
};

// One benchmark folder of one system.
struct BenchmarkResults {
  std::string system;
  std::string benchmark;      // the folder name (each run's log names its own benchmark)
  std::string dir;
  std::vector<RunRecord> runs;  // by result index
};

// Reads every result_<N>.txt under `dir`, which may be a results root (<dir>/<system>/<benchmark>/),
// one system's folder (<dir>/<benchmark>/) or one benchmark's folder. Other files are ignored.
// UserError (exit 2) when `dir` is not a directory or holds no result file at all.
std::vector<BenchmarkResults> read_results(const std::string& dir, const BenchmarkLookup& lookup);

// True when `dir` directly holds a result_<N>.txt file.
bool holds_result_files(const std::string& dir);

// The different non-empty values `get` gives over the runs, in the order first seen.
std::vector<std::string> distinct_values(const std::vector<RunRecord>& runs,
                                         const std::function<std::string(const RunRecord&)>& get);
// "a, b, c".
std::string join_values(const std::vector<std::string>& values);

// Reads one result file (check verdict included).
RunRecord read_run(const std::string& path, const BenchmarkLookup& lookup);

// MLPerf's score of N runs: drop the fastest and the slowest, average the rest. At most one run
// may have failed to converge, and then it is the dropped slowest. `valid` false says why not.
struct OlympicScore {
  bool valid = false;
  std::string why;              // when not valid: "3 runs, 5 required", "2 runs did not converge"
  double mean_s = 0.0;          // the olympic mean of time to train (seconds)
  int runs = 0;
  int converged = 0;
  int dropped_fastest = -1;     // indices into the runs given
  int dropped_slowest = -1;
};

// `required` is the number of runs the benchmark's rules ask for (0: any number >= 3).
OlympicScore olympic_score(const std::vector<RunRecord>& runs, int required);

}  // namespace mlpd
