// The ncf workload's hyperparameters, typed: read once from the resolved, rule-checked config.
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace mlpd {

struct NcfConfig {
  int mf_dim = 64;
  std::vector<int> mlp_layer_sizes;
  int train_negatives = 4;  // sampled per positive per epoch
  int64_t global_batch = 0; // positives + negatives
  uint64_t seed = 0;        // the data order and negative-sampling stream
};

// Also a rules-table key (fixed at 4 in MLPerf).
inline constexpr const char* kNcfTrainNegatives = "train_negatives";

// UserError (exit 2) on a value out of range, e.g. an odd first MLP size.
NcfConfig read_ncf_config(const nlohmann::json& config);
void check_ncf_config(const nlohmann::json& config);

}  // namespace mlpd
