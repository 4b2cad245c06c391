#include "workloads/resnet/resnet_config.h"

#include "mlperf/keys.h"

namespace mlpd {

namespace {
// Keys of ours (not MLPerf's), read here only.
constexpr const char* kModel = "model";
constexpr const char* kBlocksPerStage = "blocks_per_stage";
constexpr const char* kLabelSmoothing = "label_smoothing";
constexpr const char* kAugmentPad = "augment_pad";
constexpr const char* kAugmentFlip = "augment_flip";
constexpr const char* kBnMomentum = "bn_momentum";
constexpr const char* kZeroInitResidual = "zero_init_residual";
}  // namespace

ResnetConfig read_resnet_config(const nlohmann::json& c) {
  ResnetConfig r;
  r.model = c.at(kModel).get<std::string>();
  r.blocks_per_stage = c.at(kBlocksPerStage).get<int>();
  r.global_batch = c.at(keys::kGlobalBatchSize).get<int64_t>();
  r.bn_span = c.at(keys::kModelBnSpan).get<int64_t>();
  r.label_smoothing = c.at(kLabelSmoothing).get<float>();
  r.augment_pad = c.at(kAugmentPad).get<int>();
  r.augment_flip = c.at(kAugmentFlip).get<bool>();
  r.bn_momentum = c.at(kBnMomentum).get<float>();
  r.zero_init_residual = c.at(kZeroInitResidual).get<bool>();
  r.seed = c.at(keys::kSeed).get<uint64_t>();
  return r;
}

}  // namespace mlpd
