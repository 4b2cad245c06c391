// The one set-up path of a run, used by `train` and by every benchmark so that benches run under
// the same rules as results:
//   resolve_run: defaults -> --config -> --set, the rules table (rank-dependent rows included) and
//                the typed hyperparameters; on every rank, before any file is opened or data read.
//   build_run:   the device, the workload (data, model), its parameters (seeded on the host,
//                broadcast from rank 0, then placed on the device), the optimizer and the
//                communicator.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "comm/world.h"
#include "kernels/device.h"
#include "train/hyperparams.h"
#include "workloads/registry.h"

namespace mlpd {

struct RunRequest {
  std::string benchmark = "resnet";
  std::string scale = "mini";
  std::string config_file;            // merged over the workload's defaults
  std::vector<std::string> sets;      // key=value overrides
  std::string data_dir = "data";
  Device device = Device::cpu;        // --device
  Precision precision = Precision::fp32;  // --precision
};

// The keys every run has, typed.
struct RunConfig {
  uint64_t seed = 0;
  int max_epochs = 0;
  int64_t global_batch = 0;
};

struct ResolvedRun {
  const WorkloadEntry* entry = nullptr;
  std::string scale;
  std::string data_dir;
  nlohmann::json config;   // the whole resolved config, as logged (mlperf_dist_config)
  RunConfig run;
  Hyperparams hyper;       // schedule.steps_per_epoch is set by build_run
  double target = 0.0;     // the scale's quality target
  Device device = Device::cpu;
  Precision precision = Precision::fp32;
};

// Throws UserError/RuleError (exit code 2) on a bad config, a broken rule or bad data, alike on
// every rank, before anything is written.
ResolvedRun resolve_run(const RunRequest& request, int rank, int ranks);

struct BuiltRun {
  DeviceContext device;    // the rank's device, opened before the workload allocates on it
  std::unique_ptr<Workload> workload;
  Hyperparams hyper;       // with the workload's steps per epoch
  std::unique_ptr<Communicator> comm;
};

BuiltRun build_run(World& w, const ResolvedRun& run, const CommConfig& comm);

}  // namespace mlpd
