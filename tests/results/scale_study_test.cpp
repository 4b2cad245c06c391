// Scaling studies in the report: a scale.json read and checked field by field, found at any depth,
// and shown as a section of the page (table, three figures, the model's profile) and of the
// markdown, with every text from the file escaped.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/check.h"
#include "results/report_html.h"
#include "results/report_model.h"
#include "results/report_text.h"
#include "results/scale_study.h"
#include "results/svg.h"

namespace mlpd {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

std::string element(const std::string& html, const std::string& open, const std::string& close) {
  const size_t a = html.find(open);
  if (a == std::string::npos) return "";
  const size_t b = html.find(close, a);
  return html.substr(a, b == std::string::npos ? std::string::npos : b + close.size() - a);
}

// A scratch folder for one test, removed after it.
struct TempDir {
  fs::path path;
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path = fs::path(::testing::TempDir()) / (std::string("scale_study_") + info->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

json run_json(int ranks, int per_node, double step_s, double eff, double predicted, double error) {
  return {{"ranks", ranks},
          {"ranks_per_node", per_node},
          {"nodes", 1},
          {"steps", 27},
          {"skipped_steps", 3},
          {"global_batch", 1024.0 * ranks},
          {"configured_global_batch", 1024},
          {"work_unit", "samples"},
          {"step_s", step_s},
          {"compute_s", 0.010},
          {"comm_s", step_s - 0.0113},
          {"skew_s", 0.0005},
          {"other_s", 0.0008},
          {"compute_cv", 0.03},
          {"comm_busy_s", 0.002},
          {"throughput", 1024.0 * ranks / step_s},
          {"status", "aborted"},
          {"time_to_train_s", 12.3},
          {"epochs", 1},
          {"device", "cpu"},
          {"benchmark", "ncf"},
          {"scale", "mini"},
          {"grad_bytes", 1.2e7},
          {"exit_code", 3},
          {"efficiency", eff},
          {"predicted_step_s", predicted},
          {"error", error},
          {"in_sample", ranks == 1}};
}

// ncf mini, weak, 1/2/4 ranks on 2 cores per node: the 4-rank run is oversubscribed.
json study_json() {
  return {{"benchmark", "ncf"},
          {"scale", "mini"},
          {"mode", "weak"},
          {"steps", 30},
          {"to_target", false},
          {"cores_per_node", 2},
          {"grad_bytes", 12345678.0},
          {"runs",
           {run_json(1, 1, 0.0123, 1.0, 0.0121, -0.016), run_json(2, 2, 0.0137, 0.9, 0.0140, 0.022),
            run_json(4, 4, 0.0246, 0.5, 0.0150, -0.39)}},
          {"points", json::array()},
          {"comm", json::array()},
          {"profile",
           {{"seconds_per_sample", 9.5e-6},
            {"algo", "ring"},
            {"intra", {{"alpha_s", 2.5e-5}, {"beta_s_per_byte", 1e-10}}},
            {"source", "fitted"}}},
          {"a_field_from_the_future", {{"x", 1}}}};
}

ScaleStudy study() { return scale_study_from_json(study_json(), "s/scale.json"); }

Report report_of(const ScaleStudy& s) {
  Report rep;
  rep.source = "scale-out";
  rep.studies = {s};
  return rep;
}

// The UserError's message when `j` is read, "" when it reads.
std::string error_of(const json& j) {
  try {
    scale_study_from_json(j, "dir/scale.json");
  } catch (const UserError& e) {
    EXPECT_EQ(e.exit_code, 2) << e.what();
    return e.what();
  }
  return "";
}

TEST(ScaleStudy, reads_every_field_and_marks_oversubscribed_rank_counts) {
  const ScaleStudy s = study();
  EXPECT_EQ(s.benchmark, "ncf");
  EXPECT_EQ(s.scale, "mini");
  EXPECT_EQ(s.mode, "weak");
  EXPECT_EQ(s.steps, 30);
  EXPECT_FALSE(s.to_target);
  EXPECT_EQ(s.cores_per_node, 2);
  EXPECT_DOUBLE_EQ(s.grad_bytes, 12345678.0);
  ASSERT_EQ(s.runs.size(), 3u);
  const ScaleRun& r = s.runs[1];
  EXPECT_EQ(r.ranks, 2);
  EXPECT_EQ(r.ranks_per_node, 2);
  EXPECT_EQ(r.nodes, 1);
  EXPECT_EQ(r.steps, 27);
  EXPECT_EQ(r.skipped_steps, 3);
  EXPECT_DOUBLE_EQ(r.global_batch, 2048.0);
  EXPECT_EQ(r.work_unit, "samples");
  EXPECT_DOUBLE_EQ(r.step_s, 0.0137);
  EXPECT_DOUBLE_EQ(*r.efficiency, 0.9);
  EXPECT_DOUBLE_EQ(*r.predicted_step_s, 0.0140);
  EXPECT_DOUBLE_EQ(*r.error, 0.022);
  EXPECT_EQ(r.status, "aborted");
  EXPECT_FALSE(s.runs[0].oversubscribed);
  EXPECT_FALSE(s.runs[1].oversubscribed) << "2 ranks on 2 cores fit";
  EXPECT_TRUE(s.runs[2].oversubscribed) << "4 ranks on 2 cores share them";
}

TEST(ScaleStudy, efficiency_is_computed_when_the_file_has_none) {
  json j = study_json();
  for (json& r : j["runs"]) r.erase("efficiency");
  const ScaleStudy s = scale_study_from_json(j, "x");
  // Per-rank throughput (global_batch / step_s / ranks) against the 1-rank run's.
  EXPECT_DOUBLE_EQ(*s.runs[0].efficiency, 1.0);
  EXPECT_NEAR(*s.runs[1].efficiency, 0.0123 / 0.0137, 1e-12);
  EXPECT_NEAR(*s.runs[2].efficiency, 0.0123 / 0.0246, 1e-12);
}

TEST(ScaleStudy, optional_fields_may_be_absent) {
  json j = study_json();
  j.erase("profile");
  for (const char* key : {"nodes", "steps", "skipped_steps", "work_unit", "device", "comm_busy_s", "compute_cv",
                          "time_to_train_s", "predicted_step_s", "error"})
    j["runs"][0].erase(key);
  const ScaleStudy s = scale_study_from_json(j, "x");
  EXPECT_FALSE(s.runs[0].predicted_step_s);
  EXPECT_TRUE(s.profile.empty());
  const ScaleTable t = scale_table(s);
  EXPECT_EQ(t.rows[0][10], "-") << "no prediction";
  EXPECT_EQ(t.rows[0][8], "83252 work/s");
}

TEST(ScaleStudy, malformed_files_name_the_file_and_the_field) {
  struct Case {
    const char* what;
    std::function<void(json&)> spoil;
    std::string expected;  // a part of the message
  };
  const std::vector<Case> cases = {
      {"no runs", [](json& j) { j.erase("runs"); }, "dir/scale.json: runs: missing"},
      {"empty runs", [](json& j) { j["runs"] = json::array(); }, "runs: not a non-empty array"},
      {"no benchmark", [](json& j) { j.erase("benchmark"); }, "dir/scale.json: benchmark: missing"},
      {"benchmark a number", [](json& j) { j["benchmark"] = 3; }, "benchmark: not a string"},
      {"bad mode", [](json& j) { j["mode"] = "sideways"; }, "mode: \"sideways\" is neither weak nor strong"},
      {"steps as text", [](json& j) { j["steps"] = "30"; }, "steps: not a number"},
      {"to_target a number", [](json& j) { j["to_target"] = 1; }, "to_target: not true or false"},
      {"no cores", [](json& j) { j.erase("cores_per_node"); }, "cores_per_node: missing"},
      {"run without step_s", [](json& j) { j["runs"][1].erase("step_s"); }, "dir/scale.json: runs[1]: step_s: missing"},
      {"run not an object", [](json& j) { j["runs"][2] = 4; }, "runs[2]: not an object"},
      {"zero ranks", [](json& j) { j["runs"][0]["ranks"] = 0; }, "runs[0]: ranks: out of range"},
      {"fractional ranks", [](json& j) { j["runs"][0]["ranks"] = 2.5; }, "runs[0]: ranks: not a whole number"},
      {"huge ranks", [](json& j) { j["runs"][0]["ranks"] = 1e300; }, "runs[0]: ranks: out of range"},
      {"status a number", [](json& j) { j["runs"][0]["status"] = 0; }, "runs[0]: status: not a string"},
      {"efficiency as text", [](json& j) { j["runs"][0]["efficiency"] = "1"; }, "runs[0]: efficiency: not a number"},
  };
  for (const Case& c : cases) {
    json j = study_json();
    c.spoil(j);
    const std::string msg = error_of(j);
    EXPECT_NE(msg.find(c.expected), std::string::npos) << c.what << ": " << msg;
  }
  EXPECT_NE(error_of(json::array()).find("dir/scale.json: not a JSON object"), std::string::npos);
}

TEST(ScaleStudy, a_file_that_is_not_json_is_an_error_naming_it) {
  TempDir tmp;
  write(tmp.path / "scale.json", "{\"benchmark\": \"ncf\",");
  try {
    read_scale_study((tmp.path / "scale.json").string());
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_EQ(e.exit_code, 2);
    EXPECT_NE(std::string(e.what()).find((tmp.path / "scale.json").string() + ": not valid JSON"), std::string::npos)
        << e.what();
  }
}

TEST(ScaleStudy, profile_is_shown_key_by_key_nested_keys_dotted) {
  const ScaleStudy s = study();
  ASSERT_EQ(s.profile.size(), 5u);
  std::map<std::string, ProfileEntry> by_key;
  for (const ProfileEntry& e : s.profile) by_key[e.key] = e;
  EXPECT_DOUBLE_EQ(*by_key.at("seconds_per_sample").number, 9.5e-6);
  EXPECT_DOUBLE_EQ(*by_key.at("intra.alpha_s").number, 2.5e-5);
  EXPECT_EQ(by_key.at("algo").text, "ring");
  EXPECT_FALSE(by_key.at("algo").number);
}

TEST(ScaleStudy, find_scale_files_searches_every_depth_and_takes_a_file_itself) {
  TempDir tmp;
  write(tmp.path / "b" / "scale.json", "{}");
  write(tmp.path / "a" / "x" / "y" / "z" / "scale.json", "{}");
  write(tmp.path / "a" / "not_scale.json", "{}");
  const std::vector<std::string> found = find_scale_files(tmp.path.string());
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0], (tmp.path / "a" / "x" / "y" / "z" / "scale.json").string());
  EXPECT_EQ(found[1], (tmp.path / "b" / "scale.json").string());
  EXPECT_EQ(find_scale_files((tmp.path / "b" / "scale.json").string()).size(), 1u);
  EXPECT_TRUE(find_scale_files((tmp.path / "nowhere").string()).empty());
}

TEST(ReportModel, a_folder_of_scale_studies_alone_is_a_report) {
  TempDir tmp;
  write(tmp.path / "ncf_weak" / "scale.json", study_json().dump(2));
  fs::create_directories(tmp.path / "ncf_weak" / "ranks_1" / "results");
  for (const fs::path& p : {tmp.path, tmp.path / "ncf_weak", tmp.path / "ncf_weak" / "scale.json"}) {
    const Report rep = make_report(p.string(), nullptr);
    EXPECT_TRUE(rep.benchmarks.empty()) << p;
    ASSERT_EQ(rep.studies.size(), 1u) << p;
    EXPECT_EQ(rep.studies[0].path, (tmp.path / "ncf_weak" / "scale.json").string());
  }
}

TEST(ReportModel, a_folder_with_neither_results_nor_studies_is_an_error_with_exit_2) {
  TempDir tmp;
  fs::create_directories(tmp.path / "sub");
  try {
    make_report(tmp.path.string(), nullptr);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_EQ(e.exit_code, 2);
    EXPECT_NE(std::string(e.what()).find("no result_<N>.txt"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no scale.json"), std::string::npos) << e.what();
  }
}

TEST(ReportModel, a_malformed_scale_json_fails_the_report) {
  TempDir tmp;
  json j = study_json();
  j["runs"][0].erase("throughput");
  write(tmp.path / "s" / "scale.json", j.dump());
  try {
    make_report(tmp.path.string(), nullptr);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_EQ(e.exit_code, 2);
    EXPECT_NE(std::string(e.what()).find("scale.json: runs[0]: throughput: missing"), std::string::npos) << e.what();
  }
}

TEST(ReportModel, results_and_studies_side_by_side) {
  TempDir tmp;
  write(tmp.path / "sys" / "ncf" / "result_0.txt", "not an MLPerf log\n");
  write(tmp.path / "scales" / "ncf" / "scale.json", study_json().dump());
  const Report rep = make_report(tmp.path.string(), nullptr);
  ASSERT_EQ(rep.benchmarks.size(), 1u);
  EXPECT_EQ(rep.benchmarks[0].runs.size(), 1u);
  EXPECT_EQ(rep.studies.size(), 1u);
}

TEST(ReportHtml, scale_study_section_has_its_table_figures_and_model) {
  const Report rep = report_of(study());
  ASSERT_EQ(study_keys(rep), std::vector<std::string>{"ncf-mini-weak"});
  const std::string html = render_html(rep);
  EXPECT_EQ(html.find("id=\"summary\""), std::string::npos) << "no benchmark folder: no summary table";
  const std::string section = element(html, "<section class=\"scale-study\" id=\"scale-ncf-mini-weak\">", "</section>");
  ASSERT_FALSE(section.empty());
  EXPECT_NE(section.find("Scaling study: ncf mini, weak scaling, 30 steps per rank count"), std::string::npos);

  const std::string table =
      element(section, "<table class=\"scale-runs\" id=\"scale-runs-ncf-mini-weak\">", "</table>");
  EXPECT_EQ(count(table, "<tr class=\"scale-run"), 3u);
  EXPECT_EQ(count(table, "<tr class=\"scale-run oversubscribed\" data-ranks=\"4\">"), 1u);
  const std::string two = element(table, "data-ranks=\"2\">", "</tr>");
  // ranks, per node, batch, step, compute, comm, skew, update, throughput, efficiency, predicted, error.
  for (const char* v : {">2<", ">2048<", ">13.70<", ">10.00<", ">2.40<", ">0.50<", ">0.80<", ">149489 samples/s<",
                        ">90.0%<", ">14.00<", ">+2.2%<"})
    EXPECT_NE(two.find(v), std::string::npos) << v << " not in " << two;
  EXPECT_EQ(table.find("time to train"), std::string::npos) << "not run to the target";
  EXPECT_NE(element(table, "data-ranks=\"4\">", "</tr>").find(">oversubscribed<"), std::string::npos);
  EXPECT_EQ(element(table, "data-ranks=\"2\">", "</tr>").find("oversubscribed"), std::string::npos);
  EXPECT_NE(section.find("more ranks per node than its 2 core(s)"), std::string::npos);

  const std::string eff =
      element(section, "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"scale-efficiency-ncf-mini-weak\"", "</svg>");
  ASSERT_FALSE(eff.empty());
  EXPECT_EQ(count(eff, "<polyline class=\"scale-curve\" data-series=\"efficiency\""), 1u);
  EXPECT_EQ(count(eff, "<circle"), 3u);
  EXPECT_EQ(count(eff, "<line class=\"ideal\""), 1u);
  const std::string split = element(section, "id=\"scale-split-ncf-mini-weak\"", "</svg>");
  EXPECT_EQ(count(split, "<g class=\"stacked-bar\">"), 3u);
  EXPECT_EQ(count(split, "<rect class=\"segment\""), 12u);
  for (const char* part : {">compute<", ">comm<", ">skew<", ">update<"}) EXPECT_NE(split.find(part), std::string::npos);
  const std::string step = element(section, "id=\"scale-step-time-ncf-mini-weak\"", "</svg>");
  EXPECT_EQ(count(step, "data-series=\"measured\""), 1u);
  EXPECT_EQ(count(step, "data-series=\"predicted\""), 1u);
  const std::string model = element(section, "<dl class=\"scale-profile\"", "</dl>");
  EXPECT_NE(model.find("<dt>intra.alpha_s</dt><dd>2.5e-05</dd>"), std::string::npos) << model;
  EXPECT_NE(model.find("<dt>algo</dt><dd>ring</dd>"), std::string::npos) << model;
}

TEST(ReportHtml, a_study_to_the_target_shows_time_to_train_and_status) {
  json j = study_json();
  j["to_target"] = true;
  j["steps"] = 0;
  j["runs"][0]["status"] = "success";
  const std::string html = render_html(report_of(scale_study_from_json(j, "x")));
  EXPECT_NE(html.find("each run to the target"), std::string::npos);
  const std::string one = element(html, "data-ranks=\"1\">", "</tr>");
  EXPECT_NE(one.find(">12.3<"), std::string::npos) << one;
  EXPECT_NE(one.find(">success<"), std::string::npos) << one;
}

TEST(ReportHtml, text_from_a_scale_json_is_escaped) {
  json j = study_json();
  j["benchmark"] = "<script>alert(1)</script>";
  j["scale"] = "\"><img src=x>";
  j["runs"][0]["work_unit"] = "<i>imgs</i>";
  j["runs"][0]["status"] = "<b>done</b>";
  j["to_target"] = true;
  j["profile"] = {{"<k>", "<v>"}};
  const Report rep = report_of(scale_study_from_json(j, "<dir>/scale.json"));
  const std::string html = render_html(rep);
  for (const char* raw : {"<script", "<img", "<i>", "<b>", "<k>", "<v>", "<dir>"})
    EXPECT_EQ(html.find(raw), std::string::npos) << raw;
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_EQ(study_keys(rep)[0], "_script_alert_1___script_-___img_src_x_-weak");
  const std::string md = render_markdown(rep);
  EXPECT_EQ(md.find("<script"), std::string::npos);
  EXPECT_EQ(md.find("<i>"), std::string::npos);
}

TEST(ReportText, markdown_has_the_scale_table_and_json_the_study) {
  const Report rep = report_of(study());
  const std::string md = render_markdown(rep);
  EXPECT_NE(md.find("## Scaling study: ncf mini, weak scaling, 30 steps per rank count"), std::string::npos) << md;
  EXPECT_EQ(md.find("| system |"), std::string::npos) << "no benchmark folder: no summary table";
  EXPECT_NE(md.find("| ranks | ranks/node | global batch | step (ms) |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 1 | 1 | 1024 | 12.30 | 10.00 | 1.00 | 0.50 | 0.80 | 83252 samples/s | 100.0% | 12.10 | -1.6% |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| 50.0% | 15.00 | -39.0% | oversubscribed |"), std::string::npos) << md;
  EXPECT_NE(md.find("Oversubscribed: more ranks per node than the 2 core(s)"), std::string::npos) << md;
  EXPECT_NE(md.find("Model: "), std::string::npos);
  EXPECT_NE(md.find("intra.alpha_s 2.5e-05"), std::string::npos) << md;

  const json j = json::parse(render_json(rep));
  ASSERT_EQ(j.at("scale_studies").size(), 1u);
  EXPECT_EQ(j["scale_studies"][0]["runs"].size(), 3u);
  EXPECT_TRUE(j["scale_studies"][0]["runs"][2]["oversubscribed"].get<bool>());
  EXPECT_EQ(j["scale_studies"][0]["profile"]["algo"], "ring");
}

TEST(Svg, stacked_bars_escape_text_and_draw_no_nan) {
  StackedBarChart c{
      "id\"x", "cls", "<t>", {"a<b", "c"}, {{"<r>", {1.0, NAN}, "<n>"}, {"r2", {-1.0, INFINITY}, ""}}, 720};
  const std::string svg = svg_stacked_bars(c);
  EXPECT_EQ(count(svg, "<rect class=\"segment\""), 4u);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
  for (const char* raw : {"<t>", "a<b", "<r>", "<n>", "id\"x"}) EXPECT_EQ(svg.find(raw), std::string::npos) << raw;
  EXPECT_NE(svg.find("a&lt;b"), std::string::npos);
}

}  // namespace
}  // namespace mlpd
