// The transformer workload as the rest of the program sees it: MLPerf v0.7's Transformer
// benchmark (WMT17 En-De, cased BLEU 25.0), its rules rows, targets and the shared translation
// data converter.
#include "mlperf/keys.h"
#include "translation/prepare_translation.h"
#include "translation/translation_data.h"
#include "workloads/registry.h"
#include "workloads/translation/translation_config.h"

namespace mlpd {

extern const std::string kTransformerMiniDefaults;
extern const std::string kTransformerReferenceDefaults;
std::unique_ptr<Workload> make_transformer_workload(const WorkloadContext& ctx, const nlohmann::json& config);
void check_transformer_config(const nlohmann::json& config);

namespace {

using namespace keys;

constexpr const char* kOurs = "mlperf-dist: the valid range of the key";
constexpr const char* kV07 = "MLPerf v0.7 Transformer (closed_transformer.yaml: Adam or LazyAdam, epsilon 1e-9)";

void prepare_transformer(const PrepareRequest& r) { prepare_translation(r, kTransformer); }

void check_transformer_data(const WorkloadContext& ctx) {
  check_translation_data(workload_data_path(ctx.data_dir, kTransformer, ctx.scale));
}

WorkloadEntry make_entry() {
  WorkloadEntry e;
  BenchmarkSpec& s = e.spec;
  s.name = kTransformer;
  s.summary = "translation: Transformer on WMT17 En-De (reference) and trans-de-en German->English (mini), BLEU";
  s.metric = {"bleu", kEvalAccuracy, "fraction (BLEU / 100)", 0.0, 1.0, true, {}, {}};
  // Mini: the pairs of Debian's trans-de-en with the fixed split (src/translation); target
  // calibrated in README.md. Reference: the user's WMT files, whose size we cannot know (0: any).
  s.scales = {
      {"mini", kTransformerMiniDefaults, 0.035, 16522, 1138, "mlperf-dist mini (trans-de-en cased BLEU 3.5, calibrated)", 10, {}, {}},
      {"reference", kTransformerReferenceDefaults, 0.25, 0, 0, "MLPerf v0.7 Transformer (WMT17 En-De BLEU 25.0)", 10, {}, {}},
  };
  // Mini RCP: epochs to BLEU 3.5 of the embedded config, seeds 1-10 at 2 ranks. MLPerf has no
  // Transformer RCPs in v0.7, so none is invented for the reference scale.
  s.scales[0].rcps = {{64, {8, 7, 7, 8, 9, 8, 8, 7, 7, 8}, "src/workloads/transformer/README.md (10 seeds, 2 ranks)"}};
  s.rules = {
      {"*", "transformer.opt_name_adam_or_lazy_adam", {kOptName}, RuleKind::OneOf, {}, {kAdam, kLazyAdam}, {}, true, kV07},
      {"*", "transformer.adam_epsilon_1e-9", {kOptAdamEpsilon}, RuleKind::Equals, {1e-9}, {}, {}, true, kV07},
      {"*", "transformer.lr_positive", {kOptBaseLearningRate}, RuleKind::AtLeast, {1e-12}, {}, {}, true, kV07},
      {"*", "transformer.adam_beta_1_at_least_0", {kOptAdamBeta1}, RuleKind::AtLeast, {0}, {}, {}, true, kV07},
      {"*", "transformer.adam_beta_1_below_1", {kOptAdamBeta1}, RuleKind::AtMost, {0.999999}, {}, {}, true, kV07},
      {"*", "transformer.adam_beta_2_at_least_0", {kOptAdamBeta2}, RuleKind::AtLeast, {0}, {}, {}, true, kV07},
      {"*", "transformer.adam_beta_2_below_1", {kOptAdamBeta2}, RuleKind::AtMost, {0.999999}, {}, {}, true, kV07},
      {"*", "transformer.warmup_steps_at_least_0", {kOptLearningRateWarmupSteps}, RuleKind::AtLeast, {0}, {}, {}, true, kV07},
      {"*", "transformer.inverse_sqrt_schedule", {kAdamLrSchedule}, RuleKind::OneOf, {}, {"inverse_sqrt"}, {}, true,
       "MLPerf v0.7 Transformer reference (fairseq inverse_sqrt)"},
      {"*", "transformer.max_sequence_length_positive", {kMaxSequenceLength}, RuleKind::AtLeast, {1}, {}, {}, true, kV07},
      {"*", "transformer.max_sequence_method", {kMaxSequenceMethod}, RuleKind::OneOf, {}, {"truncate", "discard"}, {},
       true, kV07},
      {"*", "transformer.label_smoothing_0.1", {kLabelSmoothing}, RuleKind::Equals, {0.1}, {}, {}, true,
       "MLPerf v0.7 Transformer reference (not tunable)"},
      {"*", "transformer.eval_beam_size_positive", {kEvalBeamSize}, RuleKind::AtLeast, {1}, {}, {}, true, kOurs},
  };
  const std::vector<std::string> adam_keys = {kOptBaseLearningRate, kOptLearningRateWarmupSteps, kOptAdamBeta1,
                                              kOptAdamBeta2, kOptAdamEpsilon, kMaxSequenceLength};
  s.closed_log_keys = {{kAdam, adam_keys}, {kLazyAdam, adam_keys}};
  e.prepare_help = "mini: Debian's trans-de-en dictionary (default /usr/share/trans/de-en; --from another copy); "
                   "reference: --from-parallel SRC TGT (WMT17 En-De plain text) [--test-parallel SRC TGT]";
  e.prepare = &prepare_transformer;
  e.check_config = &check_transformer_config;
  e.check_data = &check_transformer_data;
  e.make = &make_transformer_workload;
  return e;
}

}  // namespace

const WorkloadEntry& transformer_entry() {
  static const WorkloadEntry entry = make_entry();
  return entry;
}

}  // namespace mlpd
