#include "results/report_model.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>

#include "core/check.h"

namespace mlpd {

std::string run_status(const RunRecord& r) { return r.check.status.empty() ? "unknown" : r.check.status; }

bool dropped_from_score(const BenchmarkReport& b, int i) {
  return b.score.valid && (i == b.score.dropped_fastest || i == b.score.dropped_slowest);
}

std::vector<ScalingRow> scaling_table(const std::vector<RunRecord>& runs) {
  std::map<int, std::vector<RunRecord>> by_ranks;
  for (const RunRecord& r : runs)
    if (r.stats && r.stats->ranks > 0) by_ranks[r.stats->ranks].push_back(r);
  if (by_ranks.size() < 2) return {};
  std::vector<ScalingRow> rows;
  for (const auto& [ranks, group] : by_ranks) {
    ScalingRow row;
    row.ranks = ranks;
    row.runs = static_cast<int>(group.size());
    double sum = 0.0, tput = 0.0;
    int timed = 0, tputs = 0;
    for (const RunRecord& r : group) {
      if (r.converged() && r.check.run_seconds) {
        ++row.converged;
        sum += *r.check.run_seconds;
        ++timed;
      }
      if (r.stats->throughput > 0.0) {
        tput += r.stats->throughput;
        ++tputs;
      }
    }
    // A scaling study is not a submission: any 3+ runs at one rank count make an olympic mean.
    const OlympicScore s = olympic_score(group, 0);
    if (s.valid) {
      row.seconds = s.mean_s;
      row.olympic = true;
    } else if (timed > 0) {
      row.seconds = sum / timed;
    }
    if (tputs > 0) row.throughput = tput / tputs;
    rows.push_back(row);
  }
  // The baseline is the smallest rank count with a time: efficiency 1 there by definition.
  const ScalingRow* base = nullptr;
  for (const ScalingRow& row : rows)
    if (row.seconds && *row.seconds > 0.0) {
      base = &row;
      break;
    }
  if (base) {
    const double base_work = *base->seconds * base->ranks;
    for (ScalingRow& row : rows)
      if (row.seconds && *row.seconds > 0.0) row.efficiency = base_work / (*row.seconds * row.ranks);
  }
  return rows;
}

BenchmarkReport make_benchmark_report(const BenchmarkResults& results, const BenchmarkLookup& lookup) {
  BenchmarkReport b;
  b.system = results.system;
  b.dir = results.dir;
  b.runs = results.runs;
  // The logs name the benchmark; the folder's name stands in when they do not agree on one.
  const std::vector<std::string> names = distinct_values(b.runs, [](const RunRecord& r) { return r.check.benchmark; });
  b.benchmark = names.size() == 1 ? names[0] : results.benchmark;
  b.scale = join_values(distinct_values(b.runs, [](const RunRecord& r) { return r.check.scale; }));
  b.division = join_values(distinct_values(b.runs, [](const RunRecord& r) { return r.check.division; }));
  const BenchmarkSpec* spec = lookup ? lookup(b.benchmark) : nullptr;
  if (spec) {
    b.known = true;
    b.metric = spec->metric;
    for (const ScaleSpec& s : spec->scales)
      if (s.name == b.scale) b.required_runs = s.result_runs;
  }
  for (const RunRecord& r : b.runs) {
    if (!b.known) break;  // without a spec, a run's target is not known either (read_run leaves 0)
    if (!b.target)
      b.target = r.target;
    else if (*b.target != r.target)
      b.mixed_targets = true;
  }
  b.score = olympic_score(b.runs, b.required_runs);
  b.scaling = scaling_table(b.runs);
  return b;
}

namespace {

// Whether read_results would find a result file: in `dir`, <dir>/*/ or <dir>/*/*/ (its levels).
bool holds_results_within_two_levels(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  if (holds_result_files(dir.string())) return true;
  for (fs::directory_iterator a(dir, ec), end; !ec && a != end; a.increment(ec)) {
    if (!a->is_directory(ec)) continue;
    if (holds_result_files(a->path().string())) return true;
    std::error_code ec2;
    for (fs::directory_iterator b(a->path(), ec2); !ec2 && b != end; b.increment(ec2))
      if (b->is_directory(ec2) && holds_result_files(b->path().string())) return true;
  }
  return false;
}

}  // namespace

Report make_report(const std::string& dir, const BenchmarkLookup& lookup) {
  Report rep;
  rep.source = dir;
  for (const std::string& path : find_scale_files(dir)) rep.studies.push_back(read_scale_study(path));
  const bool results = holds_results_within_two_levels(dir);
  std::error_code ec;
  if (rep.studies.empty() && !results && std::filesystem::is_directory(dir, ec))
    throw UserError(dir + ": no result_<N>.txt files (looked in <dir>, <dir>/*/ and <dir>/*/*/) and no scale.json "
                          "under it",
                    2);
  // Without a study, read_results says what else is wrong (not a directory); with one, a folder of
  // studies alone is a report.
  if (rep.studies.empty() || results)
    for (const BenchmarkResults& br : read_results(dir, lookup))
      rep.benchmarks.push_back(make_benchmark_report(br, lookup));
  return rep;
}

}  // namespace mlpd
