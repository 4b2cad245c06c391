#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "core/check.h"
#include "core/log.h"
#include "workloads/registry.h"

namespace mlpd::cli {

std::string workload_list_text() {
  std::string s;
  for (const std::string& n : workload_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

int main_entry(int argc, char** argv) {
  std::string workloads;
  for (const WorkloadEntry* e : workload_entries()) workloads += "  " + e->spec.name + ": " + e->spec.summary + "\n";
  CLI::App app{
      "mlperf-dist: MLPerf Training workloads, data-parallel across MPI ranks, trained to a quality\n"
      "target under MLPerf's rules, with time-to-train and scaling figures.\n"
      "Typical use:\n"
      "  mlperf-dist prepare --benchmark resnet --scale mini\n"
      "  mpirun -np 2 mlperf-dist train --benchmark resnet --scale mini\n"
      "  mlperf-dist check results/<system>/resnet/result_0.txt\n"
      "  mpirun -np 2 mlperf-dist suite --scale mini --runs 5   (MLPerf's N runs, olympic mean)\n"
      "  mlperf-dist report results/ -o report.html   (scores, runs, curves, scaling: one HTML page)\n"
      "  mlperf-dist score bleu --ref newstest.de --hyp output.de   (sacreBLEU's corpus BLEU)\n"
      "  mlperf-dist score coco --gt instances.json --dt detections.json   (pycocotools' COCO mAP)\n"
      "Workloads:\n" +
      workloads};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Print help for every subcommand");
  app.footer(kExitCodesHelp);
  GlobalArgs global;
  app.add_option("--log-level", global.log_level, "Human log level (MLLOG result lines are not affected)")
      ->check(CLI::IsMember(log_level_names()))
      ->capture_default_str();

  TrainArgs train;
  add_train_command(app, train);
  PrepareArgs prepare;
  add_prepare_command(app, prepare);
  CheckArgs check;
  add_check_command(app, check);
  ReportArgs report;
  add_report_command(app, report);
  RulesArgs rules;
  add_rules_command(app, rules);
  SuiteArgs suite;
  add_suite_command(app, suite);
  CommBenchArgs comm_bench;
  add_comm_bench_command(app, comm_bench);
  ScoreArgs score;
  add_score_command(app, score);
  ScaleArgs scale;
  add_scale_command(app, scale);
  PlanArgs plan;
  add_plan_command(app, plan);
  app.add_subcommand("list", "Print the registered workloads, one per line: name, then its scales (for scripts)");

  // CLI11 would say only "a subcommand is required" for a misspelt one: name it.
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.empty() || word[0] == '-') {
      if (word == "--log-level") ++i;  // the global option's value
      continue;
    }
    std::string names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      known = known || sub->get_name() == word;
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::fprintf(stderr, "mlperf-dist: error: unknown subcommand '%s' (available: %s)\n", word.c_str(), names.c_str());
      return kExitUsage;
    }
    break;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with code 0; every real parse error is a usage error.
    const int code = app.exit(e);
    return code == 0 ? kExitSuccess : kExitUsage;
  }
  try {
    init_logging(0, global.log_level);
    if (app.got_subcommand("train")) return run_train_command(train, global, argc, argv);
    if (app.got_subcommand("suite")) return run_suite_command(suite, global, argc, argv);
    if (app.got_subcommand("prepare")) return run_prepare_command(prepare);
    if (app.got_subcommand("check")) return run_check_command(check);
    if (app.got_subcommand("report")) return run_report_command(report);
    if (app.got_subcommand("rules")) return run_rules_command(rules);
    if (app.got_subcommand("score")) return run_score_command(score);
    if (app.got_subcommand("scale")) return run_scale_command(scale, global, argv[0]);
    if (app.got_subcommand("plan")) return run_plan_command(plan);
    if (app.got_subcommand("list")) {
      for (const WorkloadEntry* e : workload_entries()) {
        std::string line = e->spec.name;
        for (const ScaleSpec& sc : e->spec.scales) line += " " + sc.name;
        std::printf("%s\n", line.c_str());
      }
      return kExitSuccess;
    }
    if (app.got_subcommand("comm-bench")) return run_comm_bench_command(comm_bench, argc, argv);
  } catch (const UserError& e) {
    std::fprintf(stderr, "mlperf-dist: error: %s\n", e.what());
    return e.exit_code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mlperf-dist: internal error: %s\n", e.what());
    return kExitInternal;
  }
  return kExitInternal;
}

}  // namespace mlpd::cli
