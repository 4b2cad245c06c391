#include "results/report_text.h"

#include <cmath>

#include "results/format.h"
#include "results/svg.h"

namespace mlpd {

using nlohmann::json;

namespace {

// A table cell: a pipe would end the cell and a newline the row; < and & would be markup to a
// renderer that allows inline HTML (GitHub's does).
std::string md(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '|':
        out += "\\|";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '<':
        out += "&lt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '\n':
      case '\r':
        out += ' ';
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string md_row(const std::vector<std::string>& cells) {
  std::string s = "|";
  for (const std::string& c : cells) s.append(" ").append(md(c)).append(" |");  // append: g++ 12 warns on "a" + b
  return s + "\n";
}

std::string md_header(const std::vector<std::string>& names) {
  std::string s = md_row(names) + "|";
  for (size_t i = 0; i < names.size(); ++i) s += "---|";
  return s + "\n";
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// Shortest text that reads back as the same double (nlohmann's), "" when absent or not finite.
std::string csv_number(std::optional<double> v) {
  if (!v || !std::isfinite(*v)) return "";
  return json(*v).dump();
}

json opt(std::optional<double> v) { return v && std::isfinite(*v) ? json(*v) : json(nullptr); }

const std::vector<std::string> kCsvColumns = {
    "kind",  "system",          "benchmark",    "scale",     "division",      "run",         "seed",      "status",
    "check", "time_to_train_s", "final_metric", "epochs",    "global_batch",  "throughput",  "work_unit", "comm_share",
    "ranks", "device",          "precision",    "runs",         "converged", "required_runs", "score_valid", "score_s",   "score_note"};

std::string csv_row(const std::vector<std::string>& fields) {
  std::string s;
  for (size_t i = 0; i < fields.size(); ++i) s.append(i ? "," : "").append(csv_field(fields[i]));
  return s + "\n";
}

}  // namespace

std::string render_markdown(const Report& report) {
  std::string s = "# mlperf-dist report: " + md(report.source) + "\n\n";
  if (!report.benchmarks.empty())
    s += md_header({"system", "benchmark", "scale", "division", "runs", "target", "score (min)", "note"});
  for (const BenchmarkReport& b : report.benchmarks)
    s += md_row({b.system, b.benchmark, b.scale, b.division, runs_text(b), target_text(b),
                 b.score.valid ? minutes_text(b.score.mean_s) : "-", b.score.valid ? "olympic mean" : b.score.why});
  for (const BenchmarkReport& b : report.benchmarks) {
    s += "\n## " + md(b.system) + " / " + md(b.benchmark) + (b.scale.empty() ? "" : " (" + md(b.scale) + ")") + "\n\n";
    s += "Score: " + md(score_text(b)) + "\n\n";
    s += md_header({"run", "seed", "status", "check", "time to train (min)",
                    "final " + (b.known ? b.metric.name : "metric"), "epochs", "throughput", "comm share", "ranks"});
    for (size_t i = 0; i < b.runs.size(); ++i) {
      const RunRecord& r = b.runs[i];
      const std::string dropped = dropped_from_score(b, static_cast<int>(i)) ? " (dropped)" : "";
      s += md_row({std::to_string(r.index), seed_text(r), run_status(r), check_text(r),
                   minutes_text(r.check.run_seconds) + dropped, metric_text(r.check.final_accuracy), epochs_text(r),
                   r.stats ? throughput_text(*r.stats) : "-", r.stats ? percent_text(r.stats->comm_share) : "-",
                   ranks_text(r)});
    }
    if (!b.scaling.empty()) {
      s += "\nScaling:\n\n" + md_header({"ranks", "runs", "converged", "time to train (min)", "efficiency"});
      for (const ScalingRow& row : b.scaling)
        s += md_row({std::to_string(row.ranks), std::to_string(row.runs), std::to_string(row.converged),
                     minutes_text(row.seconds) + (row.seconds && !row.olympic ? " (mean)" : ""),
                     row.efficiency ? percent_text(*row.efficiency) : "-"});
    }
  }
  for (const ScaleStudy& st : report.studies) {
    s += (report.benchmarks.empty() && &st == &report.studies.front() ? "" : "\n");
    s += "## Scaling study: " + md(scale_title(st)) + "\n\n";
    s += "From " + md(st.path) + ": " + std::to_string(st.cores_per_node) + " core(s) per node; gradient " +
         short_number(st.grad_bytes, 12) + " bytes per rank per step; ms per step (means over ranks and the steps "
         "after warm-up).\n\n";
    const ScaleTable t = scale_table(st);
    s += md_header(t.columns);
    for (const std::vector<std::string>& row : t.rows) s += md_row(row);
    for (const ScaleRun& r : st.runs)
      if (r.oversubscribed) {
        s += "\nOversubscribed: more ranks per node than the " + std::to_string(st.cores_per_node) +
             " core(s); their times say little about scaling.\n";
        break;
      }
    if (!st.profile.empty()) {
      s += "\nModel:";
      for (size_t i = 0; i < st.profile.size(); ++i) {
        const ProfileEntry& e = st.profile[i];
        const std::string value = e.number ? short_number(*e.number, 6) : e.text;
        s.append(i ? ", " : " ").append(md(e.key)).append(" ").append(md(value));
      }
      s += "\n";
    }
  }
  return s;
}

std::string render_csv(const Report& report) {
  std::string s = csv_row(kCsvColumns);
  for (const BenchmarkReport& b : report.benchmarks) {
    s += csv_row({"benchmark",
                  b.system,
                  b.benchmark,
                  b.scale,
                  b.division,
                  "",
                  "",
                  "",
                  "",
                  "",
                  "",
                  "",
                  "",
                  "",
                  "",
                  "",
                  "",
                  "",
                  "",
                  std::to_string(b.score.runs),
                  std::to_string(b.score.converged),
                  std::to_string(b.required_runs),
                  b.score.valid ? "true" : "false",
                  b.score.valid ? csv_number(b.score.mean_s) : "",
                  b.score.valid ? "olympic mean" : b.score.why});
    for (const RunRecord& r : b.runs) {
      const bool st = r.stats.has_value();
      s += csv_row(
          {"run",
           b.system,
           b.benchmark,
           r.check.scale,
           r.check.division,
           std::to_string(r.index),
           r.seed ? std::to_string(*r.seed) : "",
           r.check.status,
           r.check.ok ? "passed" : "failed",
           csv_number(r.check.run_seconds),
           csv_number(r.check.final_accuracy),
           csv_number(r.epochs_to_target ? r.epochs_to_target
                                         : (r.evals.empty() ? std::nullopt : std::optional(r.evals.back().epoch))),
           r.global_batch ? std::to_string(*r.global_batch) : "",
           st ? csv_number(r.stats->throughput) : "",
           st ? r.stats->work_unit : "",
           st ? csv_number(r.stats->comm_share) : "",
           st ? std::to_string(r.stats->ranks) : "",
           st ? r.stats->device : "",
           st ? r.stats->precision : "",
           "",
           "",
           "",
           "",
           "",
           ""});
    }
  }
  return s;
}

json report_json(const Report& report) {
  json out = {{"source", report.source}, {"benchmarks", json::array()}};
  for (const BenchmarkReport& b : report.benchmarks) {
    json jb = {{"system", b.system},      {"benchmark", b.benchmark},         {"dir", b.dir},
               {"scale", b.scale},        {"division", b.division},           {"known", b.known},
               {"target", opt(b.target)}, {"mixed_targets", b.mixed_targets}, {"required_runs", b.required_runs}};
    jb["metric"] =
        b.known
            ? json{{"name", b.metric.name}, {"unit", b.metric.unit}, {"higher_is_better", b.metric.higher_is_better}}
            : json(nullptr);
    jb["score"] = {{"valid", b.score.valid},
                   {"why", b.score.why},
                   {"mean_s", b.score.valid ? json(b.score.mean_s) : json(nullptr)},
                   {"runs", b.score.runs},
                   {"converged", b.score.converged},
                   {"dropped_fastest", b.score.dropped_fastest},
                   {"dropped_slowest", b.score.dropped_slowest}};
    json runs = json::array();
    for (size_t i = 0; i < b.runs.size(); ++i) {
      const RunRecord& r = b.runs[i];
      json evals = json::array();
      for (const EvalPoint& e : r.evals)
        evals.push_back({{"seconds", opt(e.seconds)}, {"epoch", opt(e.epoch)}, {"value", opt(e.value)}});
      json jr = {{"index", r.index},
                 {"path", r.path},
                 {"seed", r.seed ? json(*r.seed) : json(nullptr)},
                 {"status", run_status(r)},
                 {"check",
                  {{"ok", r.check.ok},
                   {"converged", r.check.converged},
                   {"errors", r.check.errors},
                   {"warnings", r.check.warnings},
                   {"summary", r.check.summary}}},
                 {"scale", r.check.scale},
                 {"division", r.check.division},
                 {"time_to_train_s", opt(r.check.run_seconds)},
                 {"final_metric", opt(r.check.final_accuracy)},
                 {"global_batch", r.global_batch ? json(*r.global_batch) : json(nullptr)},
                 {"epochs_to_target", opt(r.epochs_to_target)},
                 {"target", opt(r.target)},
                 {"dropped_from_score", dropped_from_score(b, static_cast<int>(i))},
                 {"evals", evals}};
      jr["stats"] = r.stats ? json{{"throughput", opt(r.stats->throughput)},
                                   {"work_unit", r.stats->work_unit},
                                   {"comm_share", opt(r.stats->comm_share)},
                                   {"mean_step_ms", opt(r.stats->mean_step_ms)},
                                   {"steps", r.stats->steps},
                                   {"ranks", r.stats->ranks},
                                   {"nodes", r.stats->nodes},
                                   {"device", r.stats->device},
                                   {"precision", r.stats->precision}}
                            : json(nullptr);
      runs.push_back(std::move(jr));
    }
    jb["runs"] = std::move(runs);
    json scaling = json::array();
    for (const ScalingRow& row : b.scaling)
      scaling.push_back({{"ranks", row.ranks},
                         {"runs", row.runs},
                         {"converged", row.converged},
                         {"seconds", opt(row.seconds)},
                         {"olympic", row.olympic},
                         {"efficiency", opt(row.efficiency)},
                         {"throughput", opt(row.throughput)}});
    jb["scaling"] = std::move(scaling);
    out["benchmarks"].push_back(std::move(jb));
  }
  out["scale_studies"] = json::array();
  for (const ScaleStudy& st : report.studies) {
    json runs = json::array();
    for (const ScaleRun& r : st.runs)
      runs.push_back({{"ranks", r.ranks},
                      {"ranks_per_node", r.ranks_per_node},
                      {"global_batch", r.global_batch},
                      {"work_unit", r.work_unit},
                      {"step_s", r.step_s},
                      {"compute_s", r.compute_s},
                      {"comm_s", r.comm_s},
                      {"skew_s", r.skew_s},
                      {"other_s", r.other_s},
                      {"throughput", r.throughput},
                      {"efficiency", opt(r.efficiency)},
                      {"predicted_step_s", opt(r.predicted_step_s)},
                      {"error", opt(r.error)},
                      {"status", r.status},
                      {"time_to_train_s", opt(r.time_to_train_s)},
                      {"oversubscribed", r.oversubscribed}});
    json profile = json::object();
    for (const ProfileEntry& e : st.profile) profile[e.key] = e.number ? json(*e.number) : json(e.text);
    out["scale_studies"].push_back({{"path", st.path},
                                    {"benchmark", st.benchmark},
                                    {"scale", st.scale},
                                    {"mode", st.mode},
                                    {"steps", st.steps},
                                    {"to_target", st.to_target},
                                    {"cores_per_node", st.cores_per_node},
                                    {"grad_bytes", st.grad_bytes},
                                    {"runs", std::move(runs)},
                                    {"profile", std::move(profile)}});
  }
  return out;
}

std::string render_json(const Report& report) {
  // Folder names are bytes, not necessarily UTF-8: replace what is not rather than throw.
  return report_json(report).dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace mlpd
