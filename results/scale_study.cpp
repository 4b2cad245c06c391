#include "results/scale_study.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "core/check.h"
#include "core/read_file.h"
#include "results/format.h"

namespace mlpd {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string fixed(const char* format, double v) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

[[noreturn]] void bad(const std::string& where, const std::string& key, const std::string& what) {
  throw UserError(where + ": " + key + ": " + what, 2);
}

const json* find(const json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

const json& need(const json& j, const std::string& where, const char* key) {
  const json* v = find(j, key);
  if (!v) bad(where, key, "missing");
  return *v;
}

double as_number(const json& v, const std::string& where, const char* key) {
  if (!v.is_number()) bad(where, key, "not a number");
  const double d = v.get<double>();
  if (!std::isfinite(d)) bad(where, key, "not finite");
  return d;
}

// A whole number in [lo, hi]: written as 4 or 4.0, never 4.5 or 1e300 (which would not fit an int).
long long as_whole(const json& v, const std::string& where, const char* key, double lo, double hi) {
  const double d = as_number(v, where, key);
  if (d != std::floor(d)) bad(where, key, "not a whole number");
  if (d < lo || d > hi) bad(where, key, "out of range [" + fixed("%.0f", lo) + ", " + fixed("%.0f", hi) + "]");
  return static_cast<long long>(d);
}

std::string as_string(const json& v, const std::string& where, const char* key) {
  if (!v.is_string()) bad(where, key, "not a string");
  return v.get<std::string>();
}

double number(const json& j, const std::string& where, const char* key) {
  return as_number(need(j, where, key), where, key);
}

std::optional<double> opt_number(const json& j, const std::string& where, const char* key) {
  const json* v = find(j, key);
  if (!v || v->is_null()) return std::nullopt;
  return as_number(*v, where, key);
}

std::optional<long long> opt_whole(const json& j, const std::string& where, const char* key, double lo, double hi) {
  const json* v = find(j, key);
  if (!v || v->is_null()) return std::nullopt;
  return as_whole(*v, where, key, lo, hi);
}

std::string opt_string(const json& j, const std::string& where, const char* key) {
  const json* v = find(j, key);
  if (!v || v->is_null()) return "";
  return as_string(*v, where, key);
}

constexpr double kMaxRanks = 1 << 24;
constexpr double kMaxSteps = 9.0e15;  // below 2^53: a double holds it exactly

ScaleRun run_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) throw UserError(where + ": not an object", 2);
  ScaleRun r;
  r.ranks = static_cast<int>(as_whole(need(j, where, "ranks"), where, "ranks", 1, kMaxRanks));
  r.ranks_per_node =
      static_cast<int>(as_whole(need(j, where, "ranks_per_node"), where, "ranks_per_node", 1, kMaxRanks));
  if (auto n = opt_whole(j, where, "nodes", 1, kMaxRanks)) r.nodes = static_cast<int>(*n);
  r.steps = opt_whole(j, where, "steps", 0, kMaxSteps);
  r.skipped_steps = opt_whole(j, where, "skipped_steps", 0, kMaxSteps);
  r.global_batch = number(j, where, "global_batch");
  r.work_unit = opt_string(j, where, "work_unit");
  r.device = opt_string(j, where, "device");
  r.step_s = number(j, where, "step_s");
  r.compute_s = number(j, where, "compute_s");
  r.comm_s = number(j, where, "comm_s");
  r.skew_s = number(j, where, "skew_s");
  r.other_s = number(j, where, "other_s");
  r.comm_busy_s = opt_number(j, where, "comm_busy_s");
  r.compute_cv = opt_number(j, where, "compute_cv");
  r.throughput = number(j, where, "throughput");
  r.status = as_string(need(j, where, "status"), where, "status");
  r.time_to_train_s = opt_number(j, where, "time_to_train_s");
  r.efficiency = opt_number(j, where, "efficiency");
  r.predicted_step_s = opt_number(j, where, "predicted_step_s");
  r.error = opt_number(j, where, "error");
  return r;
}

// Nested objects become dotted keys, at most three levels and 200 entries: the profile is shown,
// and a hostile file must not make the page unbounded.
void flatten(const json& j, const std::string& prefix, int depth, std::vector<ProfileEntry>& out) {
  for (const auto& [key, v] : j.items()) {
    if (out.size() >= 200) return;
    const std::string k = prefix.empty() ? key : prefix + "." + key;
    if (v.is_object() && depth < 3) {
      flatten(v, k, depth + 1, out);
      continue;
    }
    ProfileEntry e{k, std::nullopt, ""};
    if (v.is_number())
      e.number = v.get<double>();
    else if (v.is_string())
      e.text = v.get<std::string>();
    else if (v.is_boolean())
      e.text = v.get<bool>() ? "true" : "false";
    else if (v.is_array())
      e.text = "[" + std::to_string(v.size()) + " values]";
    else if (v.is_object())
      e.text = "{" + std::to_string(v.size()) + " fields}";
    else
      e.text = "null";
    out.push_back(std::move(e));
  }
}

std::string ms(double s) { return fixed("%.2f", 1e3 * s); }
std::string ms(std::optional<double> s) { return s ? ms(*s) : "-"; }

}  // namespace

ScaleStudy scale_study_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) throw UserError(where + ": not a JSON object", 2);
  ScaleStudy s;
  s.path = where;
  s.benchmark = as_string(need(j, where, "benchmark"), where, "benchmark");
  s.scale = as_string(need(j, where, "scale"), where, "scale");
  s.mode = as_string(need(j, where, "mode"), where, "mode");
  if (s.mode != "weak" && s.mode != "strong") bad(where, "mode", "\"" + s.mode + "\" is neither weak nor strong");
  s.steps = as_whole(need(j, where, "steps"), where, "steps", 0, kMaxSteps);
  const json& tt = need(j, where, "to_target");
  if (!tt.is_boolean()) bad(where, "to_target", "not true or false");
  s.to_target = tt.get<bool>();
  s.cores_per_node =
      static_cast<int>(as_whole(need(j, where, "cores_per_node"), where, "cores_per_node", 0, kMaxRanks));
  s.grad_bytes = number(j, where, "grad_bytes");
  if (s.grad_bytes < 0.0) bad(where, "grad_bytes", "negative");
  const json& runs = need(j, where, "runs");
  if (!runs.is_array() || runs.empty()) bad(where, "runs", "not a non-empty array");
  for (size_t i = 0; i < runs.size(); ++i) {
    ScaleRun r = run_from_json(runs[i], where + ": runs[" + std::to_string(i) + "]");
    r.oversubscribed = s.cores_per_node > 0 && r.ranks_per_node > s.cores_per_node;
    s.runs.push_back(std::move(r));
  }
  // The writer always gives efficiency; an older or hand-written file may not. Same definition.
  const ScaleRun& base = s.runs.front();
  const double base_per_rank = base.step_s > 0.0 ? base.global_batch / base.step_s / base.ranks : 0.0;
  for (ScaleRun& r : s.runs)
    if (!r.efficiency && base_per_rank > 0.0 && r.step_s > 0.0)
      r.efficiency = r.global_batch / r.step_s / r.ranks / base_per_rank;
  if (const json* p = find(j, "profile"); p && p->is_object()) flatten(*p, "", 0, s.profile);
  return s;
}

ScaleStudy read_scale_study(const std::string& path) {
  const std::string text = read_whole_file(path, "scale study");
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw UserError(path + ": not valid JSON (" + e.what() + ")", 2);
  }
  return scale_study_from_json(j, path);
}

std::vector<std::string> find_scale_files(const std::string& path) {
  std::vector<std::string> out;
  std::error_code ec;
  const fs::path root(path);
  if (fs::is_regular_file(root, ec)) {
    if (root.filename() == "scale.json") out.push_back(root.string());
    return out;
  }
  if (!fs::is_directory(root, ec)) return out;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec))
    if (it->path().filename() == "scale.json" && it->is_regular_file(ec)) out.push_back(it->path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string scale_title(const ScaleStudy& s) {
  return s.benchmark + " " + s.scale + ", " + s.mode + " scaling, " +
         (s.to_target ? std::string("each run to the target") : std::to_string(s.steps) + " steps per rank count");
}

ScaleTable scale_table(const ScaleStudy& s) {
  ScaleTable t;
  t.columns = {"ranks",        "ranks/node", "global batch", "step (ms)",      "compute (ms)",
               "comm (ms)",    "skew (ms)",  "update (ms)",  "throughput",     "efficiency",
               "predicted (ms)", "model error"};
  if (s.to_target) t.columns.insert(t.columns.end(), {"time to train (s)", "status"});
  t.columns.push_back("note");
  for (const ScaleRun& r : s.runs) {
    std::vector<std::string> row = {std::to_string(r.ranks),
                                    std::to_string(r.ranks_per_node),
                                    fixed("%.0f", r.global_batch),
                                    ms(r.step_s),
                                    ms(r.compute_s),
                                    ms(r.comm_s),
                                    ms(r.skew_s),
                                    ms(r.other_s),
                                    throughput_text(r.throughput, r.work_unit),
                                    r.efficiency ? percent_text(*r.efficiency) : "-",
                                    ms(r.predicted_step_s),
                                    r.error ? fixed("%+.1f%%", 100.0 * *r.error) : "-"};
    if (s.to_target) {
      row.push_back(r.time_to_train_s ? fixed("%.1f", *r.time_to_train_s) : "-");
      row.push_back(r.status);
    }
    row.push_back(r.oversubscribed ? "oversubscribed" : "");
    t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace mlpd
