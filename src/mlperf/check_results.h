// `check` on a results folder: the runs of one benchmark judged as a set, the way MLPerf judges a
// submission. Beyond each file's own verdict (check.h), a set needs: the scale's number of runs
// (ScaleSpec::result_runs), at most one run that did not converge (then dropped as the slowest:
// olympic_score), a different seed per run (the same seed twice is a copied run), one benchmark,
// scale, division and global batch throughout, and, in the closed division, epochs-to-target not
// significantly faster than the reference convergence points (rcp.h).
#pragma once
#include <string>
#include <vector>

#include "mlperf/benchmark_spec.h"
#include "mlperf/rcp.h"
#include "mlperf/result_set.h"

namespace mlpd {

struct SetFinding {
  std::string where;    // the run's file it is about, else the benchmark folder
  std::string message;
};

struct ResultSetCheck {
  std::string system, benchmark, dir;  // as read_results found them
  std::string scale, division;         // what the runs logged ("" when they disagree or say nothing)
  int required_runs = 0;               // the scale's result_runs (0 when the benchmark is unknown)
  OlympicScore score;
  RcpResult rcp;
  std::vector<SetFinding> errors;      // of the set; each run's own errors are in its RunRecord
  std::vector<SetFinding> notes;       // informative: RCP not applicable, the dropped non-converged run
  bool ok = false;                     // every run's file passed and the set has no error
  std::string summary;                 // one line: score in minutes, runs, RCP verdict, PASSED/FAILED
};

// `br` from read_results; `lookup` as for check_result_file.
ResultSetCheck check_result_set(const BenchmarkResults& br, const BenchmarkLookup& lookup);

}  // namespace mlpd
