// The subcommands: each registers its options on the CLI app and runs from the parsed values.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "comm/bench/harness.h"
#include "train/trainer.h"

namespace mlpd::cli {

// Exit codes, one convention for every subcommand (printed by --help).
inline constexpr int kExitSuccess = 0;
inline constexpr int kExitInternal = 1;  // a bug or an unexpected failure (I/O, library)
inline constexpr int kExitUsage = 2;     // usage error, bad config or data, broken MLPerf rule
inline constexpr int kExitAborted = 3;   // the run ended without reaching its target (max epochs,
                                         // NaN, --max-steps) or the watchdog ended a hung job
inline constexpr const char* kExitCodesHelp =
    "Exit codes: 0 success; 2 usage error, bad config or data, or a broken MLPerf rule (nothing\n"
    "is run and no result is written); 3 run aborted (target not reached: max epochs, NaN,\n"
    "--max-steps; or a hung collective ended by the watchdog); 1 internal error.";

// Global options (every subcommand).
struct GlobalArgs {
  std::string log_level = "info";
};

struct TrainArgs {
  TrainOptions opts;
  bool print_config = false;
  bool no_overlap = false;
  std::string device = "cpu";
  std::string precision = "fp32";
};
void add_train_command(CLI::App& app, TrainArgs& a);
// --device and --precision, as train, suite and scale take them.
void add_compute_options(CLI::App* c, std::string& device, std::string& precision);
int run_train_command(TrainArgs& a, const GlobalArgs& g, int argc, char** argv);

struct PrepareArgs {
  std::string benchmark = "resnet";
  std::string scale = "mini";
  std::string from;
  std::vector<std::string> from_parallel;  // SRC TGT (translation)
  std::vector<std::string> test_parallel;  // SRC TGT (translation)
  int vocab_size = 0;                      // translation BPE; 0: the scale's default
  std::string coco_dir;                    // detection at reference scale
  int image_size = 0;                      // detection: square image size; 0: the workload's default
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

struct ReportArgs {
  std::string dir;
  std::string output;  // "" : stdout
  std::string format;  // "" : html with an output file, else md
};
void add_report_command(CLI::App& app, ReportArgs& a);
int run_report_command(const ReportArgs& a);

struct RulesArgs {
  std::string benchmark;
  std::string scale = "mini";
};
void add_rules_command(CLI::App& app, RulesArgs& a);
int run_rules_command(const RulesArgs& a);

// Runs a rank's set-up (config, rules, data checks) and agrees on the outcome: 0 when every rank
// succeeded, else the worst exit code on every rank, the lowest failing rank having said why.
int agree_on_setup(World& w, const std::function<void()>& setup);
// One training run; a failure on any rank ends the whole job (other ranks may wait in a
// collective). kExitSuccess, kExitAborted (target not reached) or the error's code.
int train_agreed(World& w, const ResolvedRun& run, const TrainOptions& opts, TrainResult& r);
// The host name up to its first dot: the default --system.
std::string default_system_name();

struct SuiteArgs {
  std::vector<std::string> benchmarks;  // empty: every workload with the scale
  std::string scale = "mini";
  int runs = 0;                         // 0: the scale's result_runs
  std::string results_dir = "results";
  std::string system;
  std::string data_dir = "data";
  std::string device = "cpu";
  std::string precision = "fp32";
  int64_t seed_base = -1;               // -1: drawn at random, printed and logged per run
  double progress_seconds = 30.0;
  std::vector<std::string> sets;        // --set key=value, applied to every benchmark of the suite
};
void add_suite_command(CLI::App& app, SuiteArgs& a);
int run_suite_command(SuiteArgs& a, const GlobalArgs& g, int argc, char** argv);

// score: a system's output against references, one subcommand per metric (bleu: sacreBLEU's
// corpus BLEU, src/translation/bleu.h).
struct ScoreArgs {
  std::string metric;  // the metric subcommand given: "bleu" or "coco"
  std::string ref;
  std::string hyp;
  std::string tokenize = "13a";
  bool lowercase = false;
  int width = 2;
  std::string gt, dt, iou_type = "bbox", json_out;  // coco
};
void add_score_command(CLI::App& app, ScoreArgs& a);
int run_score_command(const ScoreArgs& a);

// plan: predicted time-to-train against global batch at N ranks, from the scaling model in
// src/scaling/ (owned by plan_command.cpp; fields may grow).
struct PlanArgs {
  std::string benchmark;           // "" : the --profile file's, else resnet
  std::string scale;               // "" : the --profile file's, else reference
  int ranks = 0;
  std::string network;             // 100g|200g|400g|host; "" : host with --profile, else 200g
  std::string intra;               // nvlink3|nvlink4|host; "" : the device's (a100: nvlink3), host with --profile
  std::string device_profile = "a100";  // published compute figure (src/scaling/device.cpp)
  std::string profile;             // scale.json from `mlperf-dist scale` (its "profile")
  std::vector<int64_t> batches;    // candidates; empty: default_batches
  int ranks_per_node = 0;          // 0: 8 (DGX) on presets, the profile's cores on host
  std::vector<int> sweep;        // also the best plan at each of these rank counts
  int max_per_rank_batch = 0;  // 0: 256 with a device figure; with --profile, up to the largest RCP batch
  std::string algo = "auto";       // auto|ring|tree|hierarchical|allgather
  double overlap = -1;             // -1: the profile's (device figure: 0)
  double compute_cv = -1;          // -1: the profile's (device figure: 0)
  double wire_bytes = 4;           // bytes per gradient element on the wire (device figure)
  double alpha_inter_us = -1, gbps_inter = -1, efficiency_inter = -1;  // -1: the preset's
  double alpha_intra_us = -1, gbps_intra = -1, efficiency_intra = -1;
  std::string json;                // --json FILE
};
void add_plan_command(CLI::App& app, PlanArgs& a);
int run_plan_command(const PlanArgs& a);

// scale: strong or weak scaling over rank counts (each launched under mpirun), the step split
// into compute / communication / skew, the cost model fitted and its error per point.
struct ScaleArgs {
  std::string benchmark = "ncf";
  std::string scale = "mini";
  std::vector<int> ranks = {1, 2, 4};
  bool weak = false;
  bool strong = false;
  int64_t steps = 100;
  bool to_target = false;
  std::string data_dir = "data";
  std::string output_dir = "scale-results";
  std::string launcher;                 // "" : mpirun (or srun inside a Slurm allocation)
  std::vector<std::string> sets;
  std::string device = "cpu";
  std::string precision = "fp32";
  int64_t per_rank_batch = 0;           // weak: 0 = configured global batch / largest rank count
  int cores_per_node = 0;               // 0: this machine's
  bool no_comm_bench = false;
};
void add_scale_command(CLI::App& app, ScaleArgs& a);
int run_scale_command(const ScaleArgs& a, const GlobalArgs& g, const char* argv0);

// "resnet, ncf": the registry's workloads, for help texts.
std::string workload_list_text();
// The whole program: every command reads the registry (register extra workloads before calling).
int main_entry(int argc, char** argv);

// comm-bench: the harness in comm/bench/ (nccl-tests style, checked #wrong per size); the
// subcommand maps its options onto comm_bench::Options.
using CommBenchArgs = comm_bench::Options;
void add_comm_bench_command(CLI::App& app, CommBenchArgs& a);
int run_comm_bench_command(CommBenchArgs& a, int argc, char** argv);

}  // namespace mlpd::cli
