#include "mlperf/result_set.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/check.h"
#include "mlperf/keys.h"

namespace mlpd {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// result_<N>.txt -> N, else -1.
int result_index(const fs::path& p) {
  static const std::regex name(R"(result_(\d{1,9})\.txt)");
  std::smatch m;
  const std::string base = p.filename().string();
  if (!std::regex_match(base, m, name)) return -1;
  return std::stoi(m[1].str());
}

bool is_regular(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

std::vector<fs::path> sorted_entries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}


std::optional<double> number_at(const json& obj, const char* field) {
  if (!obj.is_object()) return std::nullopt;
  auto it = obj.find(field);
  if (it == obj.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// The lines the checker accepted are read again, leniently: what the verdict did not need (eval
// curve, seed, the run summary) is taken where well-formed and skipped otherwise.
void read_events(const std::string& path, RunRecord& r, const MetricSpec* metric) {
  std::ifstream in(path);
  std::string line;
  const std::string prefix = ":::MLLOG ";
  std::optional<double> run_start_ms;
  std::optional<double> test_target;
  while (std::getline(in, line)) {
    const size_t at = line.find(prefix);
    if (at == std::string::npos || line.size() > (1u << 20)) continue;
    json e = json::parse(line.begin() + static_cast<std::ptrdiff_t>(at + prefix.size()), line.end(), nullptr, false);
    if (!e.is_object() || !e.contains("key") || !e["key"].is_string()) continue;
    const std::string key = e["key"].get<std::string>();
    const json value = e.value("value", json());
    const json meta = e.value("metadata", json::object());
    const std::optional<double> t = number_at(e, "time_ms");
    if (key == keys::kSubmissionBenchmark) {
      test_target = number_at(meta, keys::kTestTarget);
    } else if (key == keys::kRunStart && t) {
      run_start_ms = t;
    } else if (key == keys::kSeed && value.is_number_unsigned()) {
      r.seed = value.get<uint64_t>();
    } else if (key == keys::kGlobalBatchSize && value.is_number_integer()) {
      r.global_batch = value.get<int64_t>();
    } else if (metric && key == metric->mllog_key && logged_metric_values(*metric, value) && t && run_start_ms) {
      EvalPoint p;
      p.seconds = (*t - *run_start_ms) / 1000.0;
      p.epoch = number_at(meta, "epoch_num").value_or(0.0);
      p.values = *logged_metric_values(*metric, value);
      p.value = p.values[0];
      r.evals.push_back(p);
    } else if (key == keys::kMlpdRunSummary && value.is_object()) {
      RunStats s;
      s.throughput = number_at(value, "throughput").value_or(0.0);
      s.comm_share = number_at(value, "comm_share").value_or(0.0);
      s.mean_step_ms = number_at(value, "mean_step_ms").value_or(0.0);
      s.steps = static_cast<int64_t>(number_at(value, "steps").value_or(0.0));
      s.ranks = static_cast<int>(number_at(value, "ranks").value_or(0.0));
      s.nodes = static_cast<int>(number_at(value, "nodes").value_or(0.0));
      if (value.contains("work_unit") && value["work_unit"].is_string()) s.work_unit = value["work_unit"];
      if (value.contains("device") && value["device"].is_string()) s.device = value["device"];
      if (value.contains("precision") && value["precision"].is_string()) s.precision = value["precision"];
      r.stats = s;
    }
  }
  if (test_target) r.target = *test_target;
}

}  // namespace

bool holds_result_files(const std::string& dir) {
  for (const fs::path& p : sorted_entries(dir))
    if (result_index(p) >= 0 && is_regular(p)) return true;
  return false;
}

std::vector<std::string> distinct_values(const std::vector<RunRecord>& runs,
                                         const std::function<std::string(const RunRecord&)>& get) {
  std::vector<std::string> out;
  for (const RunRecord& r : runs) {
    const std::string v = get(r);
    if (!v.empty() && std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

std::string join_values(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) out += (out.empty() ? "" : ", ") + v;
  return out;
}

RunRecord read_run(const std::string& path, const BenchmarkLookup& lookup) {
  RunRecord r;
  r.path = path;
  r.index = result_index(fs::path(path));
  r.check = check_result_file(path, lookup);
  const BenchmarkSpec* spec = r.check.benchmark.empty() ? nullptr : lookup(r.check.benchmark);
  const ScaleSpec* scale = nullptr;
  if (spec) {
    for (const ScaleSpec& s : spec->scales)
      if (s.name == (r.check.scale.empty() ? "reference" : r.check.scale)) {
        r.target = s.target;
        scale = &s;
      }
  }
  read_events(path, r, spec ? &spec->metric : nullptr);
  // Every part's target; a test target (read from the log into r.target) replaces them all.
  std::vector<double> targets = scale ? scale_targets(*scale) : std::vector<double>{r.target};
  if (scale && r.target != scale->target) std::fill(targets.begin(), targets.end(), r.target);
  if (spec) {
    for (const EvalPoint& p : r.evals)
      if (metric_values_reached(spec->metric, p.values, targets)) {
        r.epochs_to_target = p.epoch;
        break;
      }
  }
  return r;
}

std::vector<BenchmarkResults> read_results(const std::string& dir, const BenchmarkLookup& lookup) {
  const fs::path root(dir);
  if (!is_dir(root)) throw UserError(dir + ": not a directory", 2);
  // Which level was given: a benchmark folder holds result files; a system folder holds benchmark
  // folders; a results root holds system folders.
  std::vector<std::pair<std::string, fs::path>> bench_dirs;  // (system, folder)
  if (holds_result_files(root)) {
    bench_dirs.push_back({fs::absolute(root).lexically_normal().parent_path().filename().string(), root});
  } else {
    for (const fs::path& a : sorted_entries(root)) {
      if (!is_dir(a)) continue;
      if (holds_result_files(a)) {
        bench_dirs.push_back({fs::absolute(root).lexically_normal().filename().string(), a});
        continue;
      }
      for (const fs::path& b : sorted_entries(a))
        if (is_dir(b) && holds_result_files(b)) bench_dirs.push_back({a.filename().string(), b});
    }
  }
  std::vector<BenchmarkResults> out;
  for (const auto& [system, folder] : bench_dirs) {
    BenchmarkResults br;
    br.system = system;
    br.benchmark = folder.filename().string();
    br.dir = folder.string();
    std::vector<fs::path> files;
    for (const fs::path& p : sorted_entries(folder))
      if (result_index(p) >= 0 && is_regular(p)) files.push_back(p);
    std::sort(files.begin(), files.end(),
              [](const fs::path& a, const fs::path& b) { return result_index(a) < result_index(b); });
    for (const fs::path& p : files) br.runs.push_back(read_run(p.string(), lookup));
    out.push_back(std::move(br));
  }
  if (out.empty()) throw UserError(dir + ": no result_<N>.txt files (looked in <dir>, <dir>/*/ and <dir>/*/*/)", 2);
  return out;
}

OlympicScore olympic_score(const std::vector<RunRecord>& runs, int required) {
  OlympicScore s;
  s.runs = static_cast<int>(runs.size());
  for (const RunRecord& r : runs) s.converged += r.converged() ? 1 : 0;
  const int needed = std::max(required, 3);
  if (s.runs < needed) {
    s.why = std::to_string(s.runs) + " run(s), " + std::to_string(needed) + " required";
    return s;
  }
  if (s.runs - s.converged > 1) {
    s.why = std::to_string(s.runs - s.converged) + " runs did not converge (at most one may)";
    return s;
  }
  // A run that did not converge counts as the slowest, whatever its time.
  auto slower = [&](int a, int b) {
    const bool ca = runs[a].converged(), cb = runs[b].converged();
    if (ca != cb) return !ca;
    return runs[a].check.run_seconds.value_or(0.0) > runs[b].check.run_seconds.value_or(0.0);
  };
  s.dropped_slowest = 0;
  s.dropped_fastest = 0;
  for (int i = 1; i < s.runs; ++i) {
    if (slower(i, s.dropped_slowest)) s.dropped_slowest = i;
    if (slower(s.dropped_fastest, i)) s.dropped_fastest = i;
  }
  if (s.dropped_fastest == s.dropped_slowest) s.dropped_fastest = s.dropped_slowest == 0 ? 1 : 0;
  double sum = 0.0;
  int n = 0;
  for (int i = 0; i < s.runs; ++i) {
    if (i == s.dropped_fastest || i == s.dropped_slowest) continue;
    if (!runs[i].check.run_seconds) {
      s.why = runs[i].path + ": no run time (run_start/run_stop)";
      return s;
    }
    sum += *runs[i].check.run_seconds;
    ++n;
  }
  s.mean_s = sum / n;
  s.valid = true;
  return s;
}

}  // namespace mlpd
