// The report's figures as a reader sees them, the same in the HTML page and the markdown table:
// minutes for times, the metric with four decimals, percents for shares. Plain text, not escaped
// (the renderer escapes for its format). An absent value is "-".
#pragma once
#include <optional>
#include <string>

#include "results/report_model.h"

namespace mlpd {

std::string minutes_text(std::optional<double> seconds);                       // "12.34"
std::string metric_text(std::optional<double> value);                          // "0.7612"
std::string percent_text(double fraction);                                     // "12.3%"
std::string throughput_text(double per_second, const std::string& work_unit);  // "47452 samples/s"
std::string throughput_text(const RunStats& s);
std::string epochs_text(const RunRecord& r);  // to target, else the last eval's epoch
std::string seed_text(const RunRecord& r);
std::string ranks_text(const RunRecord& r);
// "PASSED", or "FAILED (2 errors)" when the checker rejected the log.
std::string check_text(const RunRecord& r);
// "12.34 min (olympic mean of 3 of 5 runs)" or "not valid: 3 run(s), 5 required".
std::string score_text(const BenchmarkReport& b);
// "hr@10 >= 0.2700" (<= for lower-is-better metrics); "-" when unknown.
std::string target_text(const BenchmarkReport& b);
// "5 (4 converged, 5 required)".
std::string runs_text(const BenchmarkReport& b);

}  // namespace mlpd
