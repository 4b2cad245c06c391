#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "mlperf/check.h"
#include "mlperf/rules.h"
#include "workloads/registry.h"

namespace mlpd::cli {

void add_check_command(CLI::App& app, CheckArgs& a) {
  auto* c = app.add_subcommand(
      "check", "Check result logs against MLPerf's rules (0.7.0 common and per-benchmark rules, each workload's "
               "targets, dataset sizes and metric range)");
  c->footer("Exit codes: 0 every log passed; 1 a log failed the rules; 2 usage error (e.g. no such file).");
  c->add_option("files", a.files, "result_N.txt files to check")->required()->check(CLI::ExistingFile);
}

int run_check_command(const CheckArgs& a) {
  int bad = 0;
  for (const std::string& f : a.files) {
    CheckReport rep;
    try {
      rep = check_result_file(f, &find_benchmark_spec);
    } catch (const std::exception& e) {  // a bug the file exposed: that file fails, the others are still checked
      rep.errors = {std::string("internal error: ") + e.what()};
      rep.summary = f + ": FAILED (internal error)";
    }
    for (const std::string& w : rep.warnings) std::printf("%s: warning: %s\n", f.c_str(), w.c_str());
    for (const std::string& e : rep.errors) std::printf("%s: error: %s\n", f.c_str(), e.c_str());
    std::printf("%s\n", rep.summary.c_str());  // names the file and says PASSED or FAILED
    if (!rep.ok) ++bad;
  }
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
