#include "results/format.h"

#include <cmath>
#include <cstdio>

namespace mlpd {

namespace {

std::string printf_text(const char* format, double v) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

std::string minutes_text(std::optional<double> seconds) {
  if (!seconds) return "-";
  // Mini runs take seconds: two decimals of a minute would read 0.02 for 1.3 s; three digits keep it.
  return printf_text(std::abs(*seconds) < 60.0 ? "%.3g" : "%.2f", *seconds / 60.0);
}

std::string metric_text(std::optional<double> value) { return value ? printf_text("%.4f", *value) : "-"; }

std::string percent_text(double fraction) { return printf_text("%.1f%%", fraction * 100.0); }

std::string throughput_text(double per_second, const std::string& work_unit) {
  const std::string n = printf_text(per_second >= 100.0 ? "%.0f" : "%.3g", per_second);
  return n + " " + (work_unit.empty() ? "work" : work_unit) + "/s";
}

std::string throughput_text(const RunStats& s) { return throughput_text(s.throughput, s.work_unit); }

std::string epochs_text(const RunRecord& r) {
  if (r.epochs_to_target) return printf_text("%g", *r.epochs_to_target);
  if (!r.evals.empty()) return printf_text("%g", r.evals.back().epoch);
  return "-";
}

std::string seed_text(const RunRecord& r) { return r.seed ? std::to_string(*r.seed) : "-"; }

std::string ranks_text(const RunRecord& r) {
  return r.stats && r.stats->ranks > 0 ? std::to_string(r.stats->ranks) : "-";
}

std::string check_text(const RunRecord& r) {
  if (r.check.ok) return "PASSED";
  const size_t n = r.check.errors.size();
  return "FAILED (" + std::to_string(n) + (n == 1 ? " error)" : " errors)");
}

std::string score_text(const BenchmarkReport& b) {
  if (!b.score.valid) return "not valid: " + b.score.why;
  const int counted = b.score.runs - 2;
  return minutes_text(b.score.mean_s) + " min (olympic mean of " + std::to_string(counted) + " of " +
         std::to_string(b.score.runs) + " runs)";
}

std::string target_text(const BenchmarkReport& b) {
  if (!b.known || !b.target) return "-";
  std::string s = b.metric.name + (b.metric.higher_is_better ? " >= " : " <= ") + metric_text(b.target);
  if (b.mixed_targets) s += " (the runs were checked against different targets)";
  return s;
}

std::string runs_text(const BenchmarkReport& b) {
  std::string s = std::to_string(b.score.runs) + " (" + std::to_string(b.score.converged) + " converged";
  if (b.required_runs > 0) s += ", " + std::to_string(b.required_runs) + " required";
  return s + ")";
}

}  // namespace mlpd
