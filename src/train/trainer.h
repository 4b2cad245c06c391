// The generic data-parallel training loop: one run of one workload to its quality target,
// logged under MLPerf's rules. Every workload goes through here and through its one allreduce path.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "comm/world.h"

namespace mlpd {

struct TrainOptions {
  std::string benchmark = "resnet";
  std::string scale = "mini";
  std::string config_file;            // merged over the workload's defaults
  std::vector<std::string> sets;      // key=value overrides
  std::string data_dir = "data";
  std::string results_dir = "results";
  std::string system = "local";
  double progress_seconds = 5.0;      // at most one step line per this many seconds
  CommConfig comm;                    // gradient buckets, backend, precision, overlap, watchdog
  std::string trace_path;             // Chrome trace JSON of the first trace_steps steps
  int trace_steps = 5;
  // Test and study hooks; each one that changes the result marks the run as not a result.
  int64_t max_steps = 0;              // stop after this many steps (status aborted)
  double test_target = 0.0;           // > 0: replace the target; the log says division open
  std::string dump_params;            // write rank 0's final parameters (raw float32) here
  std::string loss_log;               // write every step's global loss (hexfloat) here
};

struct TrainResult {
  bool success = false;
  std::string status;            // "success" or "aborted"
  std::string result_path;       // the result log, on rank 0
  double time_to_train_s = 0.0;  // run_start .. run_stop
  int epochs = 0;
  double final_metric = 0.0;
  double throughput = 0.0;       // training samples per second (all ranks), train steps only
  std::string sample_unit = "samples";
  double comm_share = 0.0;       // share of step time spent in gradient communication
  int64_t steps = 0;
  double mean_step_ms = 0.0;
};

// Resolves and validates the config (rules), builds the workload, trains, logs, summarises.
// Throws UserError/RuleError before run_start on bad input, on every rank alike.
TrainResult run_training(World& world, const TrainOptions& opts);

// The resolved configuration alone: defaults, then --config, then --set; rules enforced.
nlohmann::json resolve_train_config(const TrainOptions& opts);

// The closing summary as printed at run_stop.
std::string format_summary(const TrainOptions& opts, const World& world, const nlohmann::json& config,
                           const TrainResult& r);

}  // namespace mlpd
