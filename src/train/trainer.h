// The generic data-parallel training loop: one run of one workload to its quality target,
// logged under MLPerf's rules. Every workload goes through here and through its one allreduce path;
// a workload with its own outer loop (Workload::has_own_driver) drives it through LoopServices.
#pragma once
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/world.h"
#include "train/setup.h"

namespace mlpd {

struct TrainOptions {
  RunRequest run;                     // benchmark, scale, config file, --set, data dir
  std::string results_dir = "results";
  std::string system = "local";
  double progress_seconds = 5.0;      // at most one step line per this many seconds
  bool mllog_stdout = false;          // also echo every MLLOG line to stdout
  CommConfig comm;                    // gradient buckets, backend, precision, overlap, watchdog
  std::string checkpoint_dir;         // "" for none; see train/checkpoint.h
  int checkpoint_every = 0;           // epochs between checkpoints (0: only when the run stops early)
  std::string resume_dir;             // continue from this directory's latest checkpoint
  std::string trace_path;             // Chrome trace JSON of the first trace_steps steps
  int trace_steps = 5;
  std::string step_stats;             // JSON: where step time went (train/step_stats.h), for `scale`
  // Test and study hooks; each one that changes the result marks the run as not a result.
  int64_t max_steps = 0;              // stop after this many steps (status aborted)
  double test_target = 0.0;           // > 0: replace the target; the log says division open
  std::string dump_params;            // write rank 0's final parameters (raw float32) here
  std::string loss_log;               // write every step's global loss (hexfloat) here
  std::string test_fail_at;           // "RANK:STEP": that rank throws in that step (fault tests)
};

struct TrainResult {
  bool success = false;
  std::string status;            // "success" or "aborted"
  std::string result_path;       // the result log, on rank 0
  double time_to_train_s = 0.0;  // run_start .. run_stop
  int epochs = 0;
  double final_metric = 0.0;
  double throughput = 0.0;       // work per second (all ranks), train steps only
  std::string work_unit = "samples";
  double comm_share = 0.0;       // share of step time spent waiting for gradient communication
  int64_t steps = 0;
  double mean_step_ms = 0.0;
};

// Trains the resolved run (see setup.h: resolve_run on every rank first). Data and set-up errors
// are UserErrors; a run that ends without reaching the target returns status aborted.
TrainResult run_training(World& world, const ResolvedRun& run, const TrainOptions& opts);

// The closing summary as printed at run_stop.
std::string format_summary(const ResolvedRun& run, const World& world, const TrainResult& r);

}  // namespace mlpd
