// mlperf-dist: the command line. Each subcommand is a thin layer over a library call; errors
// become one clear line and a non-zero exit code (2 for a bad config or a broken rule).
#include <cblas.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "core/check.h"

int main(int argc, char** argv) {
  CLI::App app{
      "mlperf-dist: MLPerf Training workloads, data-parallel across MPI ranks, trained to a quality\n"
      "target under MLPerf's rules, with time-to-train and scaling figures.\n"
      "Typical use:\n"
      "  mlperf-dist prepare --benchmark resnet --scale mini\n"
      "  mpirun -np 2 mlperf-dist train --benchmark resnet --scale mini\n"
      "  mlperf-dist check results/<system>/resnet/result_0.txt\n"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Print help for every subcommand");

  mlpd::cli::TrainArgs train;
  mlpd::cli::add_train_command(app, train);
  mlpd::cli::PrepareArgs prepare;
  mlpd::cli::add_prepare_command(app, prepare);
  mlpd::cli::CheckArgs check;
  mlpd::cli::add_check_command(app, check);
  mlpd::cli::CommBenchArgs comm_bench;
  mlpd::cli::add_comm_bench_command(app, comm_bench);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (app.got_subcommand("train")) return mlpd::cli::run_train_command(train, argc, argv);
    if (app.got_subcommand("prepare")) return mlpd::cli::run_prepare_command(prepare);
    if (app.got_subcommand("check")) return mlpd::cli::run_check_command(check);
    if (app.got_subcommand("comm-bench")) return mlpd::cli::run_comm_bench_command(comm_bench, argc, argv);
  } catch (const mlpd::UserError& e) {
    std::fprintf(stderr, "mlperf-dist: error: %s\n", e.what());
    return e.exit_code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mlperf-dist: internal error: %s\n", e.what());
    return 1;
  }
  return 1;
}
