// What `mlperf-dist report` shows, as data: per benchmark folder of a results directory, what was
// run (system, benchmark, scale), its MLPerf score (the olympic mean of time to train, or why
// there is none), every run, and, where the runs were made at different rank counts, a scaling
// table; and every scaling study (a scale.json written by `mlperf-dist scale`) found under the
// directory. The renderers (report_html, report_text) only format this; nothing here formats.
//
// Units: times in seconds (the renderers show minutes), comm share as a fraction (0..1),
// throughput in the run's work unit per second (all ranks together).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "mlperf/benchmark_spec.h"
#include "mlperf/result_set.h"
#include "results/scale_study.h"

namespace mlpd {

// One rank count of a benchmark's runs. `seconds` is the olympic mean of the runs at that rank
// count when they make one (3 or more, at most one not converged), else the plain mean of the
// converged runs' times; absent when none converged.
struct ScalingRow {
  int ranks = 0;
  int runs = 0;
  int converged = 0;
  std::optional<double> seconds;
  bool olympic = false;              // seconds is an olympic mean (else a plain mean)
  std::optional<double> efficiency;  // (T_min_ranks * min_ranks) / (T_r * r): 1 is perfect scaling
  std::optional<double> throughput;  // mean over the runs that report one
};

struct BenchmarkReport {
  std::string system;
  std::string benchmark;  // the spec's name when known, else the folder's
  std::string dir;
  std::string scale;     // the runs' scale; "a, b" when they differ
  std::string division;  // the runs' division ("closed", "open"); "a, b" when they differ
  bool known = false;    // the registry knows the benchmark (metric and targets below)
  MetricSpec metric;
  std::optional<double> target;     // the quality target the runs were checked against (the first run's)
  bool mixed_targets = false;       // runs were checked against different targets (--test-target)
  int required_runs = 0;            // the scale's result_runs (0: unknown)
  OlympicScore score;               // over every run of the folder, as MLPerf scores a submission
  std::vector<RunRecord> runs;      // by result index
  std::vector<ScalingRow> scaling;  // by ranks; empty unless runs were made at 2+ rank counts
};

struct Report {
  std::string source;  // the directory given to `report`
  std::vector<BenchmarkReport> benchmarks;  // empty when the directory holds scaling studies only
  std::vector<ScaleStudy> studies;          // by path
};

// One benchmark folder's report. `lookup` gives the spec by the name the runs' logs carry.
BenchmarkReport make_benchmark_report(const BenchmarkResults& results, const BenchmarkLookup& lookup);
// Reads the result folders of `dir` (as read_results finds them) and every scale.json under it
// (find_scale_files; `dir` may also be a scale.json itself). UserError (exit 2) when it holds
// neither, or when a scale.json is malformed (read_scale_study).
Report make_report(const std::string& dir, const BenchmarkLookup& lookup);

// The scaling table of `runs` by their RunStats.ranks (runs without stats are left out); empty
// when fewer than two rank counts are present.
std::vector<ScalingRow> scaling_table(const std::vector<RunRecord>& runs);

// How a run ended, in one word for tables: "success", "aborted", ... from the log's run_stop
// status, "unknown" when it has none.
std::string run_status(const RunRecord& r);
// Whether the olympic mean drops run `i` of b.runs (fastest or slowest), for tables.
bool dropped_from_score(const BenchmarkReport& b, int i);

}  // namespace mlpd
