// The `tiny` test workload, registered exactly as the real ones are: a spec (metric, scales,
// rules rows), a factory, and one register call (tiny_main.cpp). It exercises what resnet and ncf
// do not: evaluation through gathered *records*, a metric outside [0, 1] where lower is better,
// batches that vary in size, and its own outer loop (generations) through the trainer's services.
#include "mlperf/keys.h"
#include "tests/workloads/tiny/tiny.h"

namespace mlpd {

namespace {

const std::string kTinyMiniDefaults = R"(# tiny: softmax regression on three Gaussian classes in 4-D, fresh samples every generation
global_batch_size: 64            # nominal; steps take 48, 64 or 80 samples in turn
steps_per_generation: 8
noise: 1.0
opt_name: sgd
opt_base_learning_rate: 0.05
opt_momentum: 0.0
opt_weight_decay: 0.0
opt_learning_rate_warmup_epochs: 0.0
lr_decay: step
lr_decay_epochs: 1.0
opt_end_learning_rate: 0.0
opt_learning_rate_decay_poly_power: 1.0
opt_learning_rate_decay_boundary_epochs: []
opt_learning_rate_decay_factor: 0.1
max_epochs: 6
seed: 1
)";

WorkloadEntry make_entry() {
  WorkloadEntry e;
  BenchmarkSpec& s = e.spec;
  s.name = "tiny";
  s.summary = "test workload: softmax regression on generated data, records evaluation, error in percent";
  s.metric = {"error%", keys::kEvalAccuracy, "percent", 0.0, 100.0, false, {"mean_confidence"}, {}};
  s.scales = {{"mini", kTinyMiniDefaults, 25.0, kTinyTrainSamples, kTinyEvalSamples, "tests/workloads/tiny", 5, {}, {}}};
  s.rules = {
      {"*", "tiny.opt_name_sgd", {keys::kOptName}, RuleKind::OneOf, {}, {keys::kSgd}, {}, true, "tiny test workload"},
      {"*", "tiny.noise_positive", {"noise"}, RuleKind::AtLeast, {0.01}, {}, {}, true, "tiny test workload"},
  };
  e.make = &make_tiny_workload;  // no prepare: the data is generated
  return e;
}

}  // namespace

const WorkloadEntry& tiny_entry() {
  static const WorkloadEntry entry = make_entry();
  return entry;
}

}  // namespace mlpd
