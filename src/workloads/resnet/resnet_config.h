// The resnet workload's hyperparameters, typed: read once from the resolved, rule-checked config.
// (The optimizer and schedule keys are read by train/hyperparams.h, the run keys by train/.)
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace mlpd {

struct ResnetConfig {
  std::string model;            // resnet20 (mini) or resnet50 (reference)
  int blocks_per_stage = 3;
  int64_t global_batch = 0;
  int64_t bn_span = 0;          // samples per batch-norm group; 0 = the per-rank batch
  float label_smoothing = 0.0f;
  int augment_pad = 0;
  bool augment_flip = false;
  float bn_momentum = 0.9f;
  bool zero_init_residual = true;
  uint64_t seed = 0;            // the data order and augmentation stream
};

ResnetConfig read_resnet_config(const nlohmann::json& config);

}  // namespace mlpd
