// The optimizer and LR schedule of a run, typed: read once from the resolved, rule-checked config,
// and the MLPerf hyperparameter events that describe them, so the log says exactly what ran.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/lr_schedule.h"
#include "train/optimizer.h"

namespace mlpd {

struct Hyperparams {
  Optimizer optimizer;
  LrSchedule schedule;  // schedule.steps_per_epoch: set by the run once the workload is built
  // The config's own values of the Adam constants (doubles), so the log reads 0.9 rather than
  // the float's 0.8999999761581421.
  double adam_beta1 = 0.0, adam_beta2 = 0.0, adam_epsilon = 0.0;
};

// Reads and validates (UserError, exit 2) the optimizer and schedule keys.
Hyperparams read_hyperparams(const nlohmann::json& config);

// key, value: each logged once. Decay steps count schedule.steps_per_epoch.
std::vector<std::pair<std::string, nlohmann::json>> hyperparam_log_entries(const Hyperparams& h);

}  // namespace mlpd
