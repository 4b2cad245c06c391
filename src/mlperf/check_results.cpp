#include "mlperf/check_results.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>

#include "mlperf/keys.h"

namespace mlpd {

namespace {

std::string base_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

}  // namespace

ResultSetCheck check_result_set(const BenchmarkResults& br, const BenchmarkLookup& lookup) {
  ResultSetCheck c;
  c.system = br.system;
  c.benchmark = br.benchmark;
  c.dir = br.dir;
  auto error = [&](const std::string& where, const std::string& m) { c.errors.push_back({where, m}); };
  auto note = [&](const std::string& where, const std::string& m) { c.notes.push_back({where, m}); };

  bool files_ok = true;
  // A run that stopped short of the target fails alone (as MLCommons' checker) but is a complete
  // log: the score below decides whether the set may hold it.
  for (const RunRecord& r : br.runs) files_ok = files_ok && r.check.complete;

  // One configuration throughout: a set mixing benchmarks, scales or divisions scores nothing.
  const auto benchmarks = distinct_values(br.runs, [](const RunRecord& r) { return r.check.benchmark; });
  const auto scales = distinct_values(br.runs, [](const RunRecord& r) {
    return r.check.benchmark.empty() ? std::string() : (r.check.scale.empty() ? "reference" : r.check.scale);
  });
  const auto divisions = distinct_values(br.runs, [](const RunRecord& r) { return r.check.division; });
  if (benchmarks.size() > 1) error(br.dir, "the runs are of different benchmarks (" + join_values(benchmarks) + ")");
  if (scales.size() > 1) error(br.dir, "the runs are of different scales (" + join_values(scales) + ")");
  if (divisions.size() > 1) error(br.dir, "the runs are of different divisions (" + join_values(divisions) + ")");
  if (scales.size() == 1) c.scale = scales[0];
  if (divisions.size() == 1) c.division = divisions[0];

  const BenchmarkSpec* spec = benchmarks.size() == 1 ? lookup(benchmarks[0]) : nullptr;
  const ScaleSpec* scale = nullptr;
  if (spec)
    for (const ScaleSpec& s : spec->scales)
      if (s.name == c.scale) scale = &s;
  c.required_runs = scale ? scale->result_runs : 0;

  // Run count and convergence: the olympic score says whether the set can be scored at all.
  c.score = olympic_score(br.runs, c.required_runs);
  if (!c.score.valid) {
    error(br.dir, c.score.why + (scale ? " (" + spec->name + " " + scale->name + ")" : ""));
  } else if (c.score.converged < c.score.runs) {
    note(br.runs[c.score.dropped_slowest].path, "did not converge: dropped as the slowest run");
  }

  // A seed used twice is the same run twice.
  std::map<uint64_t, std::string> seen;
  for (const RunRecord& r : br.runs) {
    if (!r.seed) continue;
    auto [it, fresh] = seen.emplace(*r.seed, r.path);
    if (!fresh)
      error(r.path, "seed " + std::to_string(*r.seed) + " is also the seed of " + base_name(it->second) +
                        ": a copied run? each run needs its own seed");
  }

  // The RCP test, at the one global batch of the set, in the closed division (the open division
  // may change hyperparameters, so there is nothing to compare with).
  std::vector<std::string> batches =
      distinct_values(br.runs, [](const RunRecord& r) { return r.global_batch ? std::to_string(*r.global_batch) : ""; });
  if (batches.size() > 1) error(br.dir, "the runs use different global batch sizes (" + join_values(batches) + ")");
  if (!scale) {
    c.rcp.why = "no known benchmark and scale";
  } else if (c.division != keys::kClosed) {
    c.rcp.why = "division " + (c.division.empty() ? std::string("?") : c.division) + ": RCPs bind the closed division";
  } else if (batches.size() != 1) {
    c.rcp.why = batches.empty() ? "no global_batch_size logged" : "several global batch sizes";
  } else {
    std::vector<std::optional<double>> epochs;
    for (const RunRecord& r : br.runs)
      epochs.push_back(r.converged() ? r.epochs_to_target : std::optional<double>());
    c.rcp = rcp_test(scale->rcps, std::stoll(batches[0]), epochs);
  }
  if (c.rcp.verdict == RcpVerdict::Fail)
    error(br.dir, "RCP: " + c.rcp.why + " (reference: " + c.rcp.source + ")");
  else if (c.rcp.verdict == RcpVerdict::NotApplicable)
    note(br.dir, "RCP test not applicable: " + c.rcp.why);

  c.ok = files_ok && c.errors.empty();
  std::string s = c.system + "/" + c.benchmark + " (" + (c.scale.empty() ? "?" : c.scale) + ", " +
                  (c.division.empty() ? "?" : c.division) + "): ";
  s += c.score.valid ? "score " + fmt::format("{:.2f}", c.score.mean_s / 60.0) + " min" : "score n/a";
  s += ", " + std::to_string(c.score.runs) + " runs (" + std::to_string(c.score.converged) + " converged, " +
       (c.required_runs > 0 ? std::to_string(c.required_runs) : std::string("?")) + " required)";
  s += ", RCP " + std::string(rcp_verdict_name(c.rcp.verdict));
  if (c.rcp.verdict != RcpVerdict::NotApplicable) s += " (p " + fmt::format("{:.3g}", c.rcp.p) + ")";
  s += c.ok ? ": PASSED" : ": FAILED";
  c.summary = s;
  return c;
}

}  // namespace mlpd
