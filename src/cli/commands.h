// The subcommands: each registers its options on the CLI app and runs from the parsed values.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "train/trainer.h"

namespace mlpd::cli {

struct TrainArgs {
  TrainOptions opts;
  bool print_config = false;
};
void add_train_command(CLI::App& app, TrainArgs& a);
int run_train_command(TrainArgs& a, int argc, char** argv);

struct PrepareArgs {
  std::string benchmark = "resnet";
  std::string scale = "mini";
  std::string from;
  std::string output;
  std::string data_dir = "data";
  bool force = false;
};
void add_prepare_command(CLI::App& app, PrepareArgs& a);
int run_prepare_command(const PrepareArgs& a);

struct CheckArgs {
  std::vector<std::string> files;
};
void add_check_command(CLI::App& app, CheckArgs& a);
int run_check_command(const CheckArgs& a);

}  // namespace mlpd::cli
