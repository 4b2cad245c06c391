#include "workloads/ncf/ncf_config.h"

#include "core/check.h"
#include "mlperf/keys.h"

namespace mlpd {

namespace {
// Keys of ours (MLPerf v0.5 logs them under other names or not at all), read here only.
constexpr const char* kMfDim = "mf_dim";
constexpr const char* kMlpLayerSizes = "mlp_layer_sizes";
}  // namespace

NcfConfig read_ncf_config(const nlohmann::json& c) {
  NcfConfig r;
  r.mf_dim = c.at(kMfDim).get<int>();
  r.mlp_layer_sizes = c.at(kMlpLayerSizes).get<std::vector<int>>();
  r.train_negatives = c.at(kNcfTrainNegatives).get<int>();
  r.global_batch = c.at(keys::kGlobalBatchSize).get<int64_t>();
  r.seed = c.at(keys::kSeed).get<uint64_t>();
  const auto& L = r.mlp_layer_sizes;
  if (L.size() < 2 || L[0] % 2 != 0)
    throw UserError("mlp_layer_sizes needs at least two sizes and an even first size (the two embeddings)", 2);
  for (int x : L)
    if (x < 1 || x > 65536) throw UserError("mlp_layer_sizes must lie in 1..65536", 2);
  return r;
}

void check_ncf_config(const nlohmann::json& config) { read_ncf_config(config); }

}  // namespace mlpd
