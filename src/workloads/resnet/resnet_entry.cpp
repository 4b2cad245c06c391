// The resnet workload as the rest of the program sees it: MLPerf's ResNet benchmark (top-1 on
// ImageNet at reference scale, Fashion-MNIST at mini), its rules rows, targets and converter.
#include <spdlog/spdlog.h>
#include <cstdio>

#include "core/check.h"
#include "datasets/fashion_mnist.h"
#include "datasets/image_dataset.h"
#include "mlperf/keys.h"
#include "workloads/registry.h"

namespace mlpd {

extern const std::string kResnetMiniDefaults;
extern const std::string kResnetReferenceDefaults;
std::unique_ptr<Workload> make_resnet_workload(const WorkloadContext& ctx, const nlohmann::json& config);

namespace {

using namespace keys;

constexpr const char* kV07Table = "MLPerf v0.7 tunable hyperparameters";
constexpr const char* kV07Checker = "MLPerf v0.7 compliance checker, closed_resnet_sgd.yaml";
constexpr const char* kOurs = "mlperf-dist: the valid range of the key";
const RuleCond kIfSgd{kOptName, CondOp::Eq, kSgd, 0};
const RuleCond kIfLars{kOptName, CondOp::Eq, kLars, 0};

void prepare_resnet(const PrepareRequest& r) {
  if (r.scale != "mini")
    throw UserError("prepare resnet: no ImageNet converter yet (only --scale mini: Fashion-MNIST)", 2);
  const std::string src = r.from.empty() ? kFashionMnistDebianDir : r.from;
  spdlog::info("prepare: Fashion-MNIST from {} -> {}", src, r.output);
  prepare_fashion_mnist(src, r.output);
}

void check_resnet_data(const WorkloadContext& ctx) {
  check_image_dataset(workload_data_path(ctx.data_dir, kResnet, ctx.scale));
}

WorkloadEntry make_entry() {
  WorkloadEntry e;
  BenchmarkSpec& s = e.spec;
  s.name = kResnet;
  s.summary = "image classification: ResNet-50 on ImageNet (reference), ResNet-20 on Fashion-MNIST (mini)";
  s.metric = {"top1", kEvalAccuracy, "fraction", 0.0, 1.0, true, {}, {}};
  s.scales = {
      {"mini", kResnetMiniDefaults, 0.90, 60000, 10000, "mlperf-dist mini (Fashion-MNIST top-1)", 5, {}, {}},
      {"reference", kResnetReferenceDefaults, 0.759, 1281167, 50000, "MLPerf v0.7 (ImageNet top-1)", 5, {}, {}},
  };
  // Epochs to target per seed. Mini: our calibration (README.md, "Calibration (RCP)"). Reference:
  // MLCommons' LARS RCPs, the oldest set that has resnet (v1.0; v0.7 had no RCP check), copied
  // from mlperf_logging's rcp_checker/training_1.0.0/rcps_resnet.json; each point ran its own
  // hyperparameters, listed in that file.
  s.scales[0].rcps = {{128, {4, 4, 4, 4, 4, 5, 4, 5, 4, 4}, "src/workloads/resnet/README.md (10 seeds, 2 ranks)"}};
  const std::string ref_rcps = "mlperf_logging rcp_checker/training_1.0.0/rcps_resnet.json";
  s.scales[1].rcps = {
      {1632, {34, 34, 34, 35, 35, 37, 35, 35, 33, 35, 35, 37, 37, 35, 35, 34, 35}, ref_rcps},
      {2048, {38, 39, 38, 39, 38, 39, 38, 39, 38, 38}, ref_rcps},
      {3264, {36, 35, 34, 34, 36, 35, 35, 35, 35, 37, 35, 35, 35, 36, 35}, ref_rcps},
      {4096, {39, 42, 40, 41, 39, 40, 41, 39, 40, 39}, ref_rcps},
      {8192, {42, 44, 43, 41, 41, 41, 42, 42, 43, 41}, ref_rcps},
      {13056, {44, 45, 47, 45, 45, 45, 45, 44, 44, 44, 45, 45, 45, 45, 44, 44}, ref_rcps},
      {32768, {56, 56, 55, 56, 56, 56, 56, 56, 57, 56}, ref_rcps},
      {64480, {88, 87, 86, 86, 86, 86, 86, 86, 84, 86}, ref_rcps},
      {65536, {83, 85, 84, 86, 85, 85, 83, 84, 85, 85}, ref_rcps},
  };
  s.rules = {
      {"*", "resnet.opt_name_sgd_or_lars", {kOptName}, RuleKind::OneOf, {}, {kSgd, kLars}, {}, true, kV07Table},
      {"*", "resnet.sgd_lr_multiple_of_0.001", {kOptBaseLearningRate, kSgdOptBaseLearningRate},
       RuleKind::MultipleOf, {0.001}, {}, {kIfSgd}, true, kV07Table},
      {"*", "resnet.sgd_weight_decay_1e-4_times_2^N", {kOptWeightDecay, kSgdOptWeightDecay}, RuleKind::Pow2Times,
       {1e-4}, {}, {kIfSgd}, true, kV07Table},
      {"*", "resnet.sgd_end_lr_1e-4", {kSgdOptEndLearningRate}, RuleKind::Equals, {1e-4}, {}, {kIfSgd}, false,
       kV07Checker},
      {"*", "resnet.lars_weight_decay_1e-4_times_2^N", {kLarsOptWeightDecay}, RuleKind::Pow2Times, {1e-4}, {},
       {kIfLars}, true, kV07Table},
      {"*", "resnet.lars_end_lr_1e-4", {kLarsOptEndLearningRate}, RuleKind::Equals, {1e-4}, {}, {kIfLars}, true,
       kV07Table},
      {"*", "resnet.lars_poly_power_2", {kLarsOptLearningRateDecayPolyPower}, RuleKind::Equals, {2}, {}, {kIfLars},
       true, kV07Table},
      {"*", "resnet.lars_epsilon_0", {kLarsEpsilon}, RuleKind::Equals, {0}, {}, {kIfLars}, true, kV07Table},
      {"*", "resnet.lars_momentum_0.9_below_32k_batch", {kLarsOptMomentum}, RuleKind::Equals, {0.9}, {},
       {kIfLars, {kGlobalBatchSize, CondOp::Lt, nullptr, 32768}}, true, kV07Table},
      // Ranges of our own keys (checked where present): a bad value stops before any work, naming its row.
      {"*", "resnet.model_resnet20_or_resnet50", {"model"}, RuleKind::OneOf, {}, {"resnet20", "resnet50"}, {}, false,
       kOurs},
      {"*", "resnet.blocks_per_stage_1_to_64", {"blocks_per_stage"}, RuleKind::AtLeast, {1}, {}, {}, false, kOurs},
      {"*", "resnet.blocks_per_stage_1_to_64", {"blocks_per_stage"}, RuleKind::AtMost, {64}, {}, {}, false, kOurs},
      {"*", "resnet.label_smoothing_0_to_0.5", {"label_smoothing"}, RuleKind::AtLeast, {0}, {}, {}, false, kOurs},
      {"*", "resnet.label_smoothing_0_to_0.5", {"label_smoothing"}, RuleKind::AtMost, {0.5}, {}, {}, false, kOurs},
      {"*", "resnet.augment_pad_0_to_8", {"augment_pad"}, RuleKind::AtLeast, {0}, {}, {}, false, kOurs},
      {"*", "resnet.augment_pad_0_to_8", {"augment_pad"}, RuleKind::AtMost, {8}, {}, {}, false, kOurs},
      {"*", "resnet.bn_momentum_0_to_1", {"bn_momentum"}, RuleKind::AtLeast, {0}, {}, {}, false, kOurs},
      {"*", "resnet.bn_momentum_0_to_1", {"bn_momentum"}, RuleKind::AtMost, {1}, {}, {}, false, kOurs},
      {"*", "resnet.sgd_momentum_0_to_1", {kOptMomentum}, RuleKind::AtLeast, {0}, {}, {kIfSgd}, false, kOurs},
      {"*", "resnet.sgd_momentum_0_to_1", {kOptMomentum}, RuleKind::AtMost, {0.999}, {}, {kIfSgd}, false, kOurs},
      {"*", "resnet.warmup_epochs_at_least_0", {kOptLearningRateWarmupEpochs, kLarsOptLearningRateWarmupEpochs},
       RuleKind::AtLeast, {0}, {}, {}, false, kOurs},
      {"*", "resnet.lr_decay_epochs_positive", {kLrDecayEpochs}, RuleKind::AtLeast, {0.001}, {}, {}, false, kOurs},
      {"*", "resnet.lr_decay_poly_cosine_or_step", {kLrDecay}, RuleKind::OneOf, {}, {"poly", "cosine", "step"}, {},
       false, kOurs},
      {"*", "resnet.model_bn_span_divides_local_batch", {kModelBnSpan}, RuleKind::DividesLocalBatch, {},
       {kGlobalBatchSize}, {}, false,
       "MLPerf v0.7 model_bn_span: batch-norm groups of equal size within each rank's batch"},
  };
  s.closed_log_keys = {
      {kLars,
       {kLarsOptBaseLearningRate, kLarsOptEndLearningRate, kLarsOptLearningRateDecayPolyPower,
        kLarsOptLearningRateDecaySteps, kLarsEpsilon, kLarsOptLearningRateWarmupEpochs, kLarsOptMomentum,
        kLarsOptWeightDecay}},
      {kSgd,
       {kSgdOptBaseLearningRate, kSgdOptEndLearningRate, kSgdOptLearningRateDecayPolyPower,
        kSgdOptLearningRateDecaySteps, kSgdOptWeightDecay, kSgdOptMomentum, kModelBnSpan,
        kOptLearningRateWarmupEpochs}},
  };
  e.prepare_help = "mini: the Fashion-MNIST IDX directory (default /usr/share/datasets/fashion-mnist, Debian "
                   "package dataset-fashion-mnist)";
  e.prepare = &prepare_resnet;
  e.check_data = &check_resnet_data;
  e.make = &make_resnet_workload;
  return e;
}

}  // namespace

const WorkloadEntry& resnet_entry() {
  static const WorkloadEntry entry = make_entry();
  return entry;
}

}  // namespace mlpd
