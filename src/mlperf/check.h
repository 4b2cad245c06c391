// Our own result-log checker: the MLPerf training 0.7.0 compliance rules (common, closed/open,
// resnet and its sgd/lars files, plus the stricter ordering rules of 0.7.0_warn) applied with the
// quality target, dataset sizes and metric range of the logged benchmark and scale (its
// BenchmarkSpec), and the hyperparameter rules table.
//
// The scale is read from the extra metadata field "scale" of the submission_benchmark event
// ("reference" when absent). Hyperparameter rules (rules.h) and the closed-division key lists apply
// to the closed division only.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "mlperf/benchmark_spec.h"

namespace mlpd {

struct CheckReport {
  bool ok = false;                    // no errors (warnings allowed)
  std::vector<std::string> errors;    // "line 12: ..." where a line is to blame
  std::vector<std::string> warnings;
  std::string summary;                // one line: what ran, the result, the verdict

  // What the log says (empty/absent when it does not say it).
  std::string benchmark, scale, division, status;
  std::optional<double> final_accuracy;  // the last eval_accuracy
  std::optional<double> run_seconds;     // run_stop - run_start: the timed region
  bool converged = false;                // ok, status success and the target reached
  bool complete = false;                 // no error but, perhaps, a run aborted short of the target
                                         // (MLPerf's one tolerated non-converged run of a set)
};

// `lookup` gives the benchmark's spec (metric range and direction, targets, rules) by the name the
// log's submission_benchmark carries; an unknown benchmark is an error.
// Hostile content is an error in the report, never an exception or a crash: a file that is not a
// readable regular file; a line over 1 MiB or nested deeper than 32 levels (refused unparsed);
// malformed JSON, a key repeated within one object, a value or metadata field of the wrong type;
// a negative time_ms, or time going backwards between run_start and run_stop.
CheckReport check_result_file(const std::string& path, const BenchmarkLookup& lookup);

}  // namespace mlpd
