#include "results/report_html.h"

#include <set>

#include "results/format.h"
#include "results/svg.h"

namespace mlpd {

namespace {

const char* kStyle = R"(body{font-family:sans-serif;margin:24px;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:8px 0 16px}th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.failed td{background:#fdecea}tr.dropped td{color:#888}section.benchmark{border-top:2px solid #888;margin-top:28px}
code{background:#f6f6f6;padding:0 3px}figure{margin:8px 0}.note{color:#555;font-size:90%}
ul.errors{color:#a11;font-size:90%}section.scale-study{border-top:2px solid #888;margin-top:28px}
tr.oversubscribed td{background:#fff4d6}
dl.scale-profile{display:grid;grid-template-columns:max-content auto;gap:2px 16px}
dl.scale-profile dt{font-weight:bold}dl.scale-profile dd{margin:0;font-variant-numeric:tabular-nums})";

std::string esc(const std::string& s) { return html_escape(s); }

std::string cell(const std::string& text, const std::string& cls = "") {
  return cls.empty() ? "<td>" + esc(text) + "</td>" : "<td class=\"" + cls + "\">" + esc(text) + "</td>";
}

std::string header_row(const std::vector<std::string>& names) {
  std::string s = "<tr>";
  for (const std::string& n : names) s += "<th>" + esc(n) + "</th>";
  return s + "</tr>";
}

std::string key_text(const std::string& text) {
  std::string k;
  for (char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    k += ok ? c : '_';
  }
  return k;
}

std::string key_of(const BenchmarkReport& b) { return key_text(b.system + "-" + b.benchmark); }

// Made unique by a "-2", "-3", ... suffix, in order.
std::vector<std::string> unique_keys(const std::vector<std::string>& bases) {
  std::vector<std::string> keys;
  std::set<std::string> used;
  for (const std::string& base : bases) {
    std::string k = base;
    for (int n = 2; used.count(k); ++n) k = base + "-" + std::to_string(n);
    used.insert(k);
    keys.push_back(k);
  }
  return keys;
}

std::string score_table(const BenchmarkReport& b, const std::string& key) {
  std::string s = "<table class=\"score\" id=\"score-" + key + "\">";
  auto row = [&](const std::string& name, const std::string& value, const std::string& cls = "") {
    s += "<tr><th>" + esc(name) + "</th>" + cell(value, cls) + "</tr>";
  };
  row("System", b.system);
  row("Benchmark", b.benchmark);
  row("Scale", b.scale.empty() ? "-" : b.scale);
  row("Division", b.division.empty() ? "-" : b.division);
  row("Target", target_text(b));
  row("Runs", runs_text(b));
  row("Score (time to train)", score_text(b), b.score.valid ? "score-value" : "score-value invalid");
  // A submission is one system: a score over runs at several rank counts mixes systems.
  if (!b.scaling.empty())
    row("Note", "the runs were made at " + std::to_string(b.scaling.size()) +
                    " rank counts and the score mixes them; see Scaling for each on its own");
  row("Folder", b.dir);
  return s + "</table>";
}

std::string runs_table(const BenchmarkReport& b, const std::string& key) {
  const std::string metric = b.known ? b.metric.name : "metric";
  std::string s = "<table class=\"runs\" id=\"runs-" + key + "\">";
  s += header_row({"Run", "Seed", "Status", "Check", "Time to train (min)", "Final " + metric, "Epochs", "Global batch",
                   "Throughput", "Comm share", "Ranks", "Device"});
  for (size_t i = 0; i < b.runs.size(); ++i) {
    const RunRecord& r = b.runs[i];
    std::string cls = "run";
    if (!r.check.ok) cls += " failed";
    if (dropped_from_score(b, static_cast<int>(i))) cls += " dropped";
    s += "<tr class=\"" + cls + "\" data-run=\"" + std::to_string(r.index) + "\">";
    s += cell(std::to_string(r.index), "num") + cell(seed_text(r), "num") + cell(run_status(r)) + cell(check_text(r));
    s += cell(minutes_text(r.check.run_seconds), "num") + cell(metric_text(r.check.final_accuracy), "num");
    s += cell(epochs_text(r), "num") + cell(r.global_batch ? std::to_string(*r.global_batch) : "-", "num");
    s += cell(r.stats ? throughput_text(*r.stats) : "-", "num") +
         cell(r.stats ? percent_text(r.stats->comm_share) : "-", "num");
    const bool device_known = r.stats && !r.stats->device.empty();
    const std::string precision = device_known && r.stats->precision != "fp32" ? " " + r.stats->precision : "";
    s += cell(ranks_text(r), "num") + cell(device_known ? r.stats->device + precision : "-");
    s += "</tr>";
  }
  s += "</table>";
  if (b.score.valid)
    s += "<p class=\"note\">Grey rows: the fastest and the slowest run, dropped by the olympic mean.</p>";
  // Why a log failed the checker: the reader needs the reason, not only the verdict.
  std::string errors;
  for (const RunRecord& r : b.runs)
    for (const std::string& e : r.check.errors)
      errors += "<li>run " + std::to_string(r.index) + ": " + esc(e) + "</li>";
  if (!errors.empty()) s += "<ul class=\"errors\">" + errors + "</ul>";
  return s;
}

std::string run_label(const RunRecord& r) {
  return "run " + std::to_string(r.index) + (r.seed ? " (seed " + std::to_string(*r.seed) + ")" : "");
}

std::string quality_plot(const BenchmarkReport& b, const std::string& key) {
  LinePlot p;
  p.id = "curve-" + key;
  p.css_class = "quality-vs-time";
  p.title = (b.known ? b.metric.name : "metric") + " vs time, every run of " + b.system + " / " + b.benchmark;
  p.x_label = "minutes since run_start";
  p.y_label = b.known ? b.metric.name : "metric";
  for (const RunRecord& r : b.runs) {
    if (r.evals.empty()) continue;
    PlotSeries ser;
    ser.label = run_label(r);
    ser.css_class = "run-curve";
    ser.data_key = std::to_string(r.index);
    for (const EvalPoint& e : r.evals) ser.points.push_back({e.seconds / 60.0, e.value});
    p.series.push_back(std::move(ser));
  }
  if (b.target) p.rules.push_back({*b.target, "target " + metric_text(b.target), "target"});
  if (p.series.empty()) return "<p class=\"note\">No run logged an eval.</p>";
  return "<figure>" + svg_line_plot(p) + "</figure>";
}

std::string stats_figures(const BenchmarkReport& b, const std::string& key) {
  BarChart tput{"throughput-" + key, "throughput", "throughput per run (all ranks, train steps)", {}, 0.0, 720};
  BarChart comm{
      "comm-share-" + key, "comm-share", "share of step time waiting for gradient communication", {}, 1.0, 720};
  for (const RunRecord& r : b.runs) {
    if (!r.stats) continue;
    tput.bars.push_back({run_label(r), r.stats->throughput, throughput_text(*r.stats)});
    comm.bars.push_back({run_label(r), r.stats->comm_share, percent_text(r.stats->comm_share)});
  }
  if (tput.bars.empty()) return "<p class=\"note\">No run logged its run summary (throughput, communication).</p>";
  return "<h4>Throughput</h4><figure>" + svg_bar_chart(tput) +
         "</figure><h4>Communication share of step time</h4><figure>" + svg_bar_chart(comm) + "</figure>";
}

std::string scaling_section(const BenchmarkReport& b, const std::string& key) {
  if (b.scaling.empty()) return "";
  std::string s = "<h3>Scaling</h3><table class=\"scaling\" id=\"scaling-" + key + "\">";
  s += header_row({"Ranks", "Runs", "Converged", "Time to train (min)", "Mean of", "Efficiency", "Throughput"});
  PlotSeries time{"time to train", "scaling-curve", "time", {}, false};
  PlotSeries eff{"efficiency", "scaling-curve", "efficiency", {}, false};
  std::string unit;
  for (const RunRecord& r : b.runs)
    if (r.stats && !r.stats->work_unit.empty()) unit = r.stats->work_unit;
  for (const ScalingRow& row : b.scaling) {
    s += "<tr class=\"scaling-row\" data-ranks=\"" + std::to_string(row.ranks) + "\">";
    s += cell(std::to_string(row.ranks), "num") + cell(std::to_string(row.runs), "num") +
         cell(std::to_string(row.converged), "num") + cell(minutes_text(row.seconds), "num");
    s += cell(row.seconds ? (row.olympic ? "olympic mean" : "mean of converged") : "-");
    s += cell(row.efficiency ? percent_text(*row.efficiency) : "-", "num");
    s += cell(row.throughput ? throughput_text(*row.throughput, unit) : "-", "num") + "</tr>";
    if (row.seconds) time.points.push_back({static_cast<double>(row.ranks), *row.seconds / 60.0});
    if (row.efficiency) eff.points.push_back({static_cast<double>(row.ranks), *row.efficiency});
  }
  s += "</table><p class=\"note\">Efficiency = (T at the fewest ranks x those ranks) / (T x ranks): 100% is "
       "perfect strong scaling.</p>";
  LinePlot tp;
  tp.id = "scaling-time-" + key;
  tp.css_class = "scaling-time";
  tp.title = "time to train vs ranks";
  tp.x_label = "ranks";
  tp.y_label = "time to train (min)";
  tp.log2_x = true;
  tp.series = {time};
  LinePlot ep = tp;
  ep.id = "scaling-efficiency-" + key;
  ep.css_class = "scaling-efficiency";
  ep.title = "scaling efficiency vs ranks";
  ep.y_label = "efficiency (1 = ideal)";
  ep.series = {eff};
  ep.rules = {{1.0, "ideal", "ideal"}};
  return s + "<figure>" + svg_line_plot(tp) + "</figure><figure>" + svg_line_plot(ep) + "</figure>";
}

std::string study_table(const ScaleStudy& st, const std::string& key) {
  const ScaleTable t = scale_table(st);
  std::string s = "<table class=\"scale-runs\" id=\"scale-runs-" + key + "\">" + header_row(t.columns);
  for (size_t i = 0; i < st.runs.size(); ++i) {
    const ScaleRun& r = st.runs[i];
    s += "<tr class=\"scale-run" + std::string(r.oversubscribed ? " oversubscribed" : "") + "\" data-ranks=\"" +
         std::to_string(r.ranks) + "\">";
    for (size_t c = 0; c < t.columns.size(); ++c)
      s += cell(t.rows[i][c], t.columns[c] == "status" || t.columns[c] == "note" ? "" : "num");
    s += "</tr>";
  }
  return s + "</table>";
}

std::string study_profile(const ScaleStudy& st, const std::string& key) {
  if (st.profile.empty()) return "<p class=\"note\">The file holds no model profile.</p>";
  std::string s = "<dl class=\"scale-profile\" id=\"scale-profile-" + key + "\">";
  for (const ProfileEntry& e : st.profile)
    s += "<dt>" + esc(e.key) + "</dt><dd>" + esc(e.number ? short_number(*e.number, 6) : e.text) + "</dd>";
  return s + "</dl>";
}

std::string study_section(const ScaleStudy& st, const std::string& key) {
  bool any_oversubscribed = false;
  for (const ScaleRun& r : st.runs) any_oversubscribed |= r.oversubscribed;
  std::string s = "<section class=\"scale-study\" id=\"scale-" + key + "\"><h2>Scaling study: " + esc(scale_title(st)) +
                  "</h2>\n";
  s += "<p class=\"source\">From <code>" + esc(st.path) + "</code>: " + std::to_string(st.runs.size()) +
       " rank count(s); " + std::to_string(st.cores_per_node) + " core(s) per node; gradient " +
       esc(short_number(st.grad_bytes, 12)) + " bytes per rank per step. Times are means per step over ranks and the "
       "steps after warm-up; efficiency is the throughput per rank relative to the fewest ranks' (100% is perfect " +
       esc(st.mode) + " scaling); the model error is (predicted - measured) / measured.</p>\n";
  s += study_table(st, key) + "\n";
  if (any_oversubscribed)
    s += "<p class=\"note\">Highlighted rows are oversubscribed: more ranks per node than its " +
         std::to_string(st.cores_per_node) +
         " core(s), so ranks share cores and their times say little about scaling.</p>\n";
  LinePlot eff;
  eff.id = "scale-efficiency-" + key;
  eff.css_class = "scale-efficiency";
  eff.title = "scaling efficiency vs ranks, " + scale_title(st);
  eff.x_label = "ranks";
  eff.y_label = "efficiency (%)";
  eff.log2_x = true;
  PlotSeries e{"efficiency", "scale-curve", "efficiency", {}, false};
  PlotSeries measured{"measured", "scale-curve", "measured", {}, false};
  PlotSeries predicted{"predicted (model)", "scale-curve", "predicted", {}, true};
  StackedBarChart split{"scale-split-" + key, "scale-split", "where the step goes, per rank count (ms)",
                        {"compute", "comm", "skew", "update"}, {}, 720};
  for (const ScaleRun& r : st.runs) {
    const double x = r.ranks;
    if (r.efficiency) e.points.push_back({x, 100.0 * *r.efficiency});
    measured.points.push_back({x, 1e3 * r.step_s});
    if (r.predicted_step_s) predicted.points.push_back({x, 1e3 * *r.predicted_step_s});
    split.bars.push_back({std::to_string(r.ranks) + (r.ranks == 1 ? " rank" : " ranks"),
                          {1e3 * r.compute_s, 1e3 * r.comm_s, 1e3 * r.skew_s, 1e3 * r.other_s},
                          short_number(1e3 * r.step_s) + " ms per step"});
  }
  eff.series = {e};
  eff.rules = {{100.0, "ideal", "ideal"}};
  LinePlot step = eff;
  step.id = "scale-step-time-" + key;
  step.css_class = "scale-step-time";
  step.title = "measured and predicted step time vs ranks, " + scale_title(st);
  step.y_label = "step (ms)";
  step.series = {measured};
  if (!predicted.points.empty()) step.series.push_back(predicted);
  step.rules.clear();
  s += "<h3>Efficiency</h3><figure>" + svg_line_plot(eff) + "</figure>\n";
  s += "<h3>Where the step goes</h3><figure>" + svg_stacked_bars(split) + "</figure>\n";
  s += "<h3>Measured vs predicted step time</h3><figure>" + svg_line_plot(step) + "</figure>\n";
  s += "<h3>Model</h3>" + study_profile(st, key) + "</section>\n";
  return s;
}

}  // namespace

std::vector<std::string> section_keys(const Report& report) {
  std::vector<std::string> bases;
  for (const BenchmarkReport& b : report.benchmarks) bases.push_back(key_of(b));
  return unique_keys(bases);
}

std::vector<std::string> study_keys(const Report& report) {
  std::vector<std::string> bases;
  for (const ScaleStudy& st : report.studies) bases.push_back(key_text(st.benchmark + "-" + st.scale + "-" + st.mode));
  return unique_keys(bases);
}

namespace {

std::string studies_html(const Report& report) {
  const std::vector<std::string> keys = study_keys(report);
  std::string s;
  for (size_t i = 0; i < report.studies.size(); ++i) s += study_section(report.studies[i], keys[i]);
  return s;
}

}  // namespace

std::string render_html(const Report& report) {
  const std::vector<std::string> keys = section_keys(report);
  size_t runs = 0;
  for (const BenchmarkReport& b : report.benchmarks) runs += b.runs.size();
  std::string s = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>mlperf-dist report: " +
                  esc(report.source) + "</title><style>" + kStyle + "</style></head><body>\n";
  s += "<h1>mlperf-dist report</h1><p class=\"source\">Results in <code>" + esc(report.source) +
       "</code>: " + std::to_string(report.benchmarks.size()) + " benchmark folder(s), " + std::to_string(runs) +
       " run(s), " + std::to_string(report.studies.size()) +
       " scaling study(ies). Times are MLPerf's time to train (run_start to run_stop); a score is the olympic mean "
       "(the fastest and slowest run dropped).</p>\n";
  if (report.benchmarks.empty()) return s + studies_html(report) + "</body></html>\n";
  s += "<table class=\"summary\" id=\"summary\">" + header_row({"System", "Benchmark", "Scale", "Runs", "Score"});
  for (size_t i = 0; i < report.benchmarks.size(); ++i) {
    const BenchmarkReport& b = report.benchmarks[i];
    s += "<tr class=\"benchmark\"><td>" + esc(b.system) + "</td><td><a href=\"#bench-" + keys[i] + "\">" +
         esc(b.benchmark) + "</a></td>" + cell(b.scale) + cell(runs_text(b)) + cell(score_text(b)) + "</tr>";
  }
  s += "</table>\n";
  for (size_t i = 0; i < report.benchmarks.size(); ++i) {
    const BenchmarkReport& b = report.benchmarks[i];
    const std::string& k = keys[i];
    s += "<section class=\"benchmark\" id=\"bench-" + k + "\"><h2>" + esc(b.system) + " / " + esc(b.benchmark) +
         (b.scale.empty() ? "" : " (" + esc(b.scale) + ")") + "</h2>\n";
    s += score_table(b, k) + "\n<h3>Runs</h3>" + runs_table(b, k) + "\n";
    s += "<h3>Quality vs time</h3>" + quality_plot(b, k) + "\n";
    s += "<h3>Throughput and communication</h3>" + stats_figures(b, k) + "\n";
    s += scaling_section(b, k) + "</section>\n";
  }
  return s + studies_html(report) + "</body></html>\n";
}

}  // namespace mlpd
