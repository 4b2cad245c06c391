// The report on synthetic records: what each format says of a score, of every run and of a
// scaling study, and that text from a log never reaches the page as markup.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "results/format.h"
#include "results/report_html.h"
#include "results/report_model.h"
#include "results/report_text.h"
#include "results/svg.h"

namespace mlpd {
namespace {

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

// The text of the element that opens with `open` (up to the matching close tag name `close`).
std::string element(const std::string& html, const std::string& open, const std::string& close) {
  const size_t a = html.find(open);
  if (a == std::string::npos) return "";
  const size_t b = html.find(close, a);
  return html.substr(a, b == std::string::npos ? std::string::npos : b + close.size() - a);
}

MetricSpec hr10() {
  MetricSpec m;
  m.name = "hr@10";
  m.unit = "fraction";
  return m;
}

BenchmarkSpec spec() {
  BenchmarkSpec s;
  s.name = "ncf";
  s.metric = hr10();
  ScaleSpec mini;
  mini.name = "mini";
  mini.target = 0.27;
  mini.result_runs = 5;
  s.scales = {mini};
  return s;
}

const BenchmarkSpec* lookup(const std::string& name) {
  static const BenchmarkSpec s = spec();
  return name == "ncf" ? &s : nullptr;
}

// A converged (or not) run of `seconds`, with an eval every 10 s ending there.
RunRecord run(int index, double seconds, bool converged = true, int ranks = 1) {
  RunRecord r;
  r.path = "results/sys/ncf/result_" + std::to_string(index) + ".txt";
  r.index = index;
  r.check.ok = true;
  r.check.benchmark = "ncf";
  r.check.scale = "mini";
  r.check.division = "closed";
  r.check.status = converged ? "success" : "aborted";
  r.check.converged = converged;
  r.check.run_seconds = seconds;
  r.check.final_accuracy = converged ? 0.30 : 0.20;
  r.seed = 100 + static_cast<uint64_t>(index);
  r.global_batch = 4096;
  r.target = 0.27;
  for (double t = 10.0; t < seconds; t += 10.0) r.evals.push_back({t, t / 10.0, 0.1 + 0.01 * t / 10.0, {0.1 + 0.01 * t / 10.0}});
  r.evals.push_back({seconds, std::ceil(seconds / 10.0), r.check.final_accuracy.value(), {r.check.final_accuracy.value()}});
  if (converged) r.epochs_to_target = r.evals.back().epoch;
  RunStats st;
  st.throughput = 40000.0 * ranks;
  st.work_unit = "samples";
  st.comm_share = ranks > 1 ? 0.25 : 0.0;
  st.mean_step_ms = 80.0;
  st.steps = 121;
  st.ranks = ranks;
  st.nodes = 1;
  st.device = "cpu";
  r.stats = st;
  return r;
}

BenchmarkResults five_runs() {
  BenchmarkResults br;
  br.system = "sys";
  br.benchmark = "ncf";
  br.dir = "results/sys/ncf";
  br.runs = {run(0, 60.0), run(1, 30.0), run(2, 90.0), run(3, 120.0), run(4, 600.0)};
  return br;
}

Report report_of(const BenchmarkResults& br) {
  Report rep;
  rep.source = "results";
  rep.benchmarks = {make_benchmark_report(br, &lookup)};
  return rep;
}

TEST(ReportModel, olympic_score_and_spec_facts_per_benchmark) {
  const BenchmarkReport b = make_benchmark_report(five_runs(), &lookup);
  EXPECT_EQ(b.benchmark, "ncf");
  EXPECT_EQ(b.scale, "mini");
  EXPECT_EQ(b.division, "closed");
  EXPECT_TRUE(b.known);
  EXPECT_EQ(b.required_runs, 5);
  ASSERT_TRUE(b.target.has_value());
  EXPECT_DOUBLE_EQ(*b.target, 0.27);
  ASSERT_TRUE(b.score.valid) << b.score.why;
  EXPECT_DOUBLE_EQ(b.score.mean_s, (60.0 + 90.0 + 120.0) / 3.0);  // 30 s and 600 s dropped
  EXPECT_TRUE(dropped_from_score(b, 1));
  EXPECT_TRUE(dropped_from_score(b, 4));
  EXPECT_FALSE(dropped_from_score(b, 0));
  EXPECT_TRUE(b.scaling.empty()) << "one rank count is no scaling study";
}

TEST(ReportModel, too_few_runs_say_why_there_is_no_score) {
  BenchmarkResults br = five_runs();
  br.runs.resize(3);
  const BenchmarkReport b = make_benchmark_report(br, &lookup);
  EXPECT_FALSE(b.score.valid);
  EXPECT_EQ(score_text(b), "not valid: 3 run(s), 5 required");
}

TEST(ReportModel, scaling_table_by_ranks_with_efficiency_against_fewest_ranks) {
  // 1 rank: 3 runs (olympic mean = the middle one, 100 s); 2 ranks: 2 runs (plain mean 60 s);
  // 4 ranks: 1 converged run of 40 s and one that did not converge (left out of the mean).
  std::vector<RunRecord> runs = {run(0, 90.0),           run(1, 100.0),         run(2, 130.0),
                                 run(3, 50.0, true, 2),  run(4, 70.0, true, 2), run(5, 40.0, true, 4),
                                 run(6, 500.0, false, 4)};
  const std::vector<ScalingRow> t = scaling_table(runs);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].ranks, 1);
  EXPECT_TRUE(t[0].olympic);
  EXPECT_DOUBLE_EQ(*t[0].seconds, 100.0);
  EXPECT_DOUBLE_EQ(*t[0].efficiency, 1.0);
  EXPECT_EQ(t[1].ranks, 2);
  EXPECT_FALSE(t[1].olympic);
  EXPECT_DOUBLE_EQ(*t[1].seconds, 60.0);
  EXPECT_DOUBLE_EQ(*t[1].efficiency, 100.0 / (60.0 * 2));
  EXPECT_EQ(t[2].runs, 2);
  EXPECT_EQ(t[2].converged, 1);
  EXPECT_DOUBLE_EQ(*t[2].seconds, 40.0);
  EXPECT_DOUBLE_EQ(*t[2].efficiency, 100.0 / (40.0 * 4));
  EXPECT_DOUBLE_EQ(*t[1].throughput, 80000.0);
}

TEST(ReportModel, runs_without_a_run_summary_are_left_out_of_scaling) {
  std::vector<RunRecord> runs = {run(0, 90.0), run(1, 50.0, true, 2)};
  runs[1].stats.reset();
  EXPECT_TRUE(scaling_table(runs).empty());
}

TEST(ReportHtml, escapes_every_markup_character) {
  EXPECT_EQ(html_escape(R"(<a href="x">'&'</a>)"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  EXPECT_EQ(html_escape("plain"), "plain");
}

TEST(ReportHtml, text_from_logs_and_folders_is_escaped) {
  BenchmarkResults br = five_runs();
  br.system = "<script>alert(1)</script>";
  br.runs[2].check.ok = false;
  br.runs[2].check.errors = {"line 3: bad value \"<img src=x onerror=alert(2)>\""};
  br.runs[0].check.status = "<b>done</b>";
  br.runs[1].stats->work_unit = "<i>imgs</i>";
  const std::string html = render_html(report_of(br));
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<b>done"), std::string::npos);
  EXPECT_EQ(html.find("<i>imgs"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("&lt;img src=x onerror=alert(2)&gt;"), std::string::npos);
  // The section key keeps only [A-Za-z0-9_-]: an id is never a way out of its attribute.
  EXPECT_EQ(section_keys(report_of(br))[0], "_script_alert_1___script_-ncf");
}

TEST(ReportHtml, score_table_says_what_ran_and_its_score) {
  const std::string html = render_html(report_of(five_runs()));
  EXPECT_EQ(section_keys(report_of(five_runs()))[0], "sys-ncf");
  const std::string score = element(html, "<table class=\"score\" id=\"score-sys-ncf\">", "</table>");
  ASSERT_FALSE(score.empty()) << html;
  EXPECT_NE(score.find("<td>ncf</td>"), std::string::npos);
  EXPECT_NE(score.find("<td>mini</td>"), std::string::npos);
  EXPECT_NE(score.find("hr@10 &gt;= 0.2700"), std::string::npos);
  EXPECT_NE(score.find("5 (5 converged, 5 required)"), std::string::npos);
  EXPECT_NE(score.find("<td class=\"score-value\">1.50 min (olympic mean of 3 of 5 runs)</td>"), std::string::npos)
      << score;
  const std::string runs = element(html, "<table class=\"runs\" id=\"runs-sys-ncf\">", "</table>");
  EXPECT_EQ(count(runs, "<tr class=\"run"), 5u);
  EXPECT_EQ(count(runs, " dropped\""), 2u);
  EXPECT_NE(runs.find("data-run=\"3\"><td class=\"num\">3</td><td class=\"num\">103</td><td>success</td><td>PASSED</td>"
                      "<td class=\"num\">2.00</td><td class=\"num\">0.3000</td><td class=\"num\">12</td>"),
            std::string::npos)
      << runs;
  EXPECT_NE(runs.find("40000 samples/s"), std::string::npos);
  const std::string summary = element(html, "<table class=\"summary\" id=\"summary\">", "</table>");
  EXPECT_EQ(count(summary, "<tr class=\"benchmark\">"), 1u);
}

TEST(ReportHtml, quality_plot_has_one_curve_per_run_and_the_dashed_target) {
  BenchmarkResults br = five_runs();
  br.runs[3].evals.clear();  // a run that logged no eval has no curve
  const std::string html = render_html(report_of(br));
  const std::string svg = element(html, "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"curve-sys-ncf\"", "</svg>");
  ASSERT_FALSE(svg.empty());
  EXPECT_NE(svg.find("class=\"quality-vs-time\""), std::string::npos);
  EXPECT_EQ(count(svg, "<polyline class=\"run-curve\""), 4u);
  for (const char* run : {"\"0\"", "\"1\"", "\"2\"", "\"4\""})
    EXPECT_NE(svg.find(std::string("data-series=") + run), std::string::npos) << run;
  EXPECT_EQ(count(svg, "<line class=\"target\""), 1u);
  EXPECT_NE(element(svg, "<line class=\"target\"", "/>").find("stroke-dasharray"), std::string::npos);
  EXPECT_NE(svg.find(">target 0.2700</text>"), std::string::npos) << "the legend names the target";
  EXPECT_NE(svg.find(">run 4 (seed 104)</text>"), std::string::npos) << "the legend names each run";
  // Every curve point is inside the plot (no NaN coordinates).
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  // Throughput and communication figures: one bar per run with a run summary.
  EXPECT_EQ(count(element(html, "id=\"throughput-sys-ncf\"", "</svg>"), "<rect class=\"bar\""), 5u);
  EXPECT_EQ(count(element(html, "id=\"comm-share-sys-ncf\"", "</svg>"), "<rect class=\"bar\""), 5u);
  EXPECT_EQ(html.find("class=\"scaling\""), std::string::npos) << "no scaling section for one rank count";
  // Self-contained: nothing fetched from elsewhere.
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
}

TEST(ReportHtml, scaling_section_when_runs_differ_in_ranks) {
  BenchmarkResults br = five_runs();
  br.runs.push_back(run(5, 40.0, true, 2));
  br.runs.push_back(run(6, 20.0, true, 4));
  const std::string html = render_html(report_of(br));
  const std::string table = element(html, "<table class=\"scaling\" id=\"scaling-sys-ncf\">", "</table>");
  ASSERT_FALSE(table.empty());
  EXPECT_EQ(count(table, "<tr class=\"scaling-row\""), 3u);
  EXPECT_NE(table.find("data-ranks=\"4\""), std::string::npos);
  const std::string time = element(html, "id=\"scaling-time-sys-ncf\"", "</svg>");
  EXPECT_EQ(count(time, "<polyline class=\"scaling-curve\""), 1u);
  const std::string eff = element(html, "id=\"scaling-efficiency-sys-ncf\"", "</svg>");
  EXPECT_EQ(count(eff, "<line class=\"ideal\""), 1u);
  EXPECT_EQ(eff.find("nan"), std::string::npos);
}

TEST(ReportText, markdown_has_a_score_row_per_benchmark_and_a_row_per_run) {
  const std::string md = render_markdown(report_of(five_runs()));
  EXPECT_NE(
      md.find("| sys | ncf | mini | closed | 5 (5 converged, 5 required) | hr@10 >= 0.2700 | 1.50 | olympic mean |"),
      std::string::npos)
      << md;
  EXPECT_NE(md.find("| 4 | 104 | success | PASSED | 10.00 (dropped) | 0.3000 | 60 | 40000 samples/s | 0.0% | 1 |"),
            std::string::npos)
      << md;
  EXPECT_EQ(count(md, "| success | PASSED |"), 5u);
}

TEST(ReportText, markdown_cells_cannot_break_the_table) {
  BenchmarkResults br = five_runs();
  br.system = "a|b\nc";
  const std::string md = render_markdown(report_of(br));
  EXPECT_NE(md.find("| a\\|b c | ncf |"), std::string::npos) << md;
}

TEST(ReportText, csv_quotes_fields_and_has_benchmark_and_run_rows) {
  BenchmarkResults br = five_runs();
  br.system = "lab, \"rack 2\"";
  const std::string csv = render_csv(report_of(br));
  std::vector<std::string> lines;
  for (size_t a = 0, b; (b = csv.find('\n', a)) != std::string::npos; a = b + 1) lines.push_back(csv.substr(a, b - a));
  ASSERT_EQ(lines.size(), 1u + 1u + 5u);
  EXPECT_EQ(lines[0].rfind("kind,system,benchmark,scale,division,run,seed,status,check,time_to_train_s,", 0), 0u);
  // 14 run columns empty on a benchmark row, 6 score columns empty on a run row; numbers as JSON writes them.
  EXPECT_EQ(lines[1], "benchmark,\"lab, \"\"rack 2\"\"\",ncf,mini,closed" + std::string(14, ',') +
                          ",5,5,5,true,90.0,olympic mean");
  EXPECT_EQ(lines[2],
            "run,\"lab, \"\"rack 2\"\"\",ncf,mini,closed,0,100,success,passed,60.0,0.3,6.0,4096,40000.0,"
            "samples,0.0,1,cpu,fp32" +
                std::string(6, ','));
}

TEST(ReportText, json_holds_the_full_model) {
  BenchmarkResults br = five_runs();
  br.runs[0].stats.reset();
  br.runs[1].check.run_seconds.reset();
  const nlohmann::json j = nlohmann::json::parse(render_json(report_of(br)));
  ASSERT_EQ(j["benchmarks"].size(), 1u);
  const nlohmann::json& b = j["benchmarks"][0];
  EXPECT_EQ(b["system"], "sys");
  EXPECT_EQ(b["metric"]["name"], "hr@10");
  EXPECT_EQ(b["required_runs"], 5);
  EXPECT_DOUBLE_EQ(b["target"].get<double>(), 0.27);
  ASSERT_EQ(b["runs"].size(), 5u);
  EXPECT_TRUE(b["runs"][0]["stats"].is_null());
  EXPECT_TRUE(b["runs"][1]["time_to_train_s"].is_null());
  EXPECT_EQ(b["runs"][2]["seed"], 102);
  EXPECT_EQ(b["runs"][2]["evals"].size(), 9u);
  EXPECT_DOUBLE_EQ(b["runs"][2]["evals"][8]["seconds"].get<double>(), 90.0);
  EXPECT_EQ(b["runs"][3]["stats"]["work_unit"], "samples");
  EXPECT_TRUE(b["scaling"].is_array());
  EXPECT_TRUE(b["score"].contains("valid"));
}

TEST(ReportText, json_replaces_bytes_that_are_not_utf8) {
  BenchmarkResults br = five_runs();
  br.system = "sys\xff";
  EXPECT_NO_THROW(nlohmann::json::parse(render_json(report_of(br))));
}

TEST(Svg, plot_of_hostile_numbers_ends_and_draws_no_nan) {
  LinePlot p;
  p.id = "x";
  p.series = {{"a", "run-curve", "0", {{0.0, 1e17}, {1.0, 1e17 + 16}, {NAN, 1.0}, {INFINITY, 2.0}}, false}};
  p.rules = {{NAN, "t", "target"}};
  const std::string svg = svg_line_plot(p);
  EXPECT_EQ(count(svg, "<polyline"), 1u);
  EXPECT_EQ(count(svg, "<line class=\"target\""), 0u);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
}

}  // namespace
}  // namespace mlpd
