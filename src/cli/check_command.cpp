#include <cstdio>
#include <exception>
#include <filesystem>

#include "cli/commands.h"
#include "mlperf/check.h"
#include "mlperf/check_results.h"
#include "mlperf/result_set.h"
#include "mlperf/rules.h"
#include "workloads/registry.h"

namespace mlpd::cli {

void add_check_command(CLI::App& app, CheckArgs& a) {
  auto* c = app.add_subcommand(
      "check", "Check result logs against MLPerf's rules (0.7.0 common and per-benchmark rules, each workload's "
               "targets, dataset sizes and metric range)");
  c->footer("A folder (results/, results/<system>/ or results/<system>/<benchmark>/) is checked as MLPerf checks a\n"
            "submission: each result_N.txt, then per benchmark the number of runs, convergence, distinct seeds\n"
            "and the RCP test; one line per benchmark, then SUCCESS or FAILED.\n"
            "Exit codes: 0 every log (and set) passed; 1 a log or a set failed the rules; 2 usage error (e.g. no\n"
            "such file, a folder without result files).");
  c->add_option("files", a.files, "result_N.txt files or results folders to check")
      ->required()
      ->check(CLI::ExistingPath);
}

namespace {

void print_report(const std::string& f, const CheckReport& rep) {
  for (const std::string& w : rep.warnings) std::printf("%s: warning: %s\n", f.c_str(), w.c_str());
  for (const std::string& e : rep.errors) std::printf("%s: error: %s\n", f.c_str(), e.c_str());
  std::printf("%s\n", rep.summary.c_str());  // names the file and says PASSED or FAILED
}

// Every benchmark set under `dir`; false when one fails. No result file at all is a usage error
// (UserError from read_results, exit 2).
bool check_folder(const std::string& dir) {
  bool ok = true;
  for (const BenchmarkResults& br : read_results(dir, &find_benchmark_spec)) {
    for (const RunRecord& r : br.runs) print_report(r.path, r.check);
    ResultSetCheck set;
    try {
      set = check_result_set(br, &find_benchmark_spec);
    } catch (const std::exception& e) {  // as for a file: this set fails, the others are still checked
      set.errors = {{br.dir, std::string("internal error: ") + e.what()}};
      set.summary = br.system + "/" + br.benchmark + ": FAILED (internal error)";
    }
    for (const SetFinding& n : set.notes) std::printf("%s: note: %s\n", n.where.c_str(), n.message.c_str());
    for (const SetFinding& e : set.errors) std::printf("%s: error: %s\n", e.where.c_str(), e.message.c_str());
    std::printf("%s\n", set.summary.c_str());
    ok = ok && set.ok;
  }
  return ok;
}

}  // namespace

int run_check_command(const CheckArgs& a) {
  int bad = 0;
  bool any_folder = false;
  for (const std::string& f : a.files) {
    std::error_code ec;
    if (std::filesystem::is_directory(f, ec)) {
      any_folder = true;
      if (!check_folder(f)) ++bad;
      continue;
    }
    CheckReport rep;
    try {
      rep = check_result_file(f, &find_benchmark_spec);
    } catch (const std::exception& e) {  // a bug the file exposed: that file fails, the others are still checked
      rep.errors = {std::string("internal error: ") + e.what()};
      rep.summary = f + ": FAILED (internal error)";
    }
    print_report(f, rep);
    if (!rep.ok) ++bad;
  }
  if (any_folder) std::printf("%s\n", bad == 0 ? "SUCCESS" : "FAILED");  // single files print as before
  return bad == 0 ? 0 : 1;
}

void add_rules_command(CLI::App& app, RulesArgs& a) {
  auto* c = app.add_subcommand("rules", "Print a workload's rules table: what a user may tune, and its target");
  c->footer(kExitCodesHelp);
  c->add_option("--benchmark,-b", a.benchmark, "Workload: " + workload_list_text())
      ->check(CLI::IsMember(workload_names()))
      ->required();
  c->add_option("--scale,-s", a.scale, "mini or reference")->check(CLI::IsMember({"mini", "reference"}))->capture_default_str();
}

int run_rules_command(const RulesArgs& a) {
  std::printf("%s", describe_rules(find_workload(a.benchmark).spec, a.scale).c_str());
  return 0;
}

}  // namespace mlpd::cli
