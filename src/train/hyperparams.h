// From the resolved config to the optimizer, the LR schedule, and the MLPerf hyperparameter
// events that describe them, so the log says exactly what ran.
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
  LrSchedule schedule;
  std::vector<std::pair<std::string, nlohmann::json>> mllog_entries;  // key, value: logged once each
};

Hyperparams make_hyperparams(const nlohmann::json& cfg, int64_t steps_per_epoch);

}  // namespace mlpd
