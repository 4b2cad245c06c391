// The gnmt workload as the rest of the program sees it: MLPerf's GNMT benchmark (WMT16 En-De,
// uncased BLEU 24.0), its rules rows, targets and the shared translation data converter.
#include "mlperf/keys.h"
#include "translation/prepare_translation.h"
#include "translation/translation_data.h"
#include "workloads/registry.h"
#include "workloads/translation/translation_config.h"

namespace mlpd {

extern const std::string kGnmtMiniDefaults;
extern const std::string kGnmtReferenceDefaults;
std::unique_ptr<Workload> make_gnmt_workload(const WorkloadContext& ctx, const nlohmann::json& config);
void check_gnmt_config(const nlohmann::json& config);

namespace {

using namespace keys;

constexpr const char* kOurs = "mlperf-dist: the valid range of the key";
constexpr const char* kV07 = "MLPerf v0.7 GNMT (closed_gnmt.yaml; reference: Adam with the GNMT warmup/decay schedule)";

void prepare_gnmt(const PrepareRequest& r) { prepare_translation(r, kGnmt); }

void check_gnmt_data(const WorkloadContext& ctx) {
  check_translation_data(workload_data_path(ctx.data_dir, kGnmt, ctx.scale));
}

WorkloadEntry make_entry() {
  WorkloadEntry e;
  BenchmarkSpec& s = e.spec;
  s.name = kGnmt;
  s.summary = "translation: GNMT (LSTM + attention) on WMT16 En-De (reference) and trans-de-en (mini), uncased BLEU";
  s.metric = {"bleu", kEvalAccuracy, "fraction (BLEU / 100)", 0.0, 1.0, true, {}, {}};
  s.scales = {
      {"mini", kGnmtMiniDefaults, 0.008, 16522, 1138, "mlperf-dist mini (trans-de-en uncased BLEU 0.8, calibrated)", 10, {}, {}},
      {"reference", kGnmtReferenceDefaults, 0.24, 0, 0, "MLPerf v0.7 GNMT (WMT16 En-De uncased BLEU 24.0)", 10, {}, {}},
  };
  // Mini RCP: epochs to BLEU 0.8 of the embedded config, seeds 1-6 at 2 ranks (README.md).
  s.scales[0].rcps = {{32, {4, 5, 4, 6, 4, 11}, "src/workloads/gnmt/README.md (6 seeds, 2 ranks)"}};
  s.rules = {
      {"*", "gnmt.opt_name_adam", {kOptName}, RuleKind::OneOf, {}, {kAdam}, {}, true, kV07},
      {"*", "gnmt.lr_positive", {kOptBaseLearningRate}, RuleKind::AtLeast, {1e-12}, {}, {}, true, kV07},
      {"*", "gnmt.gnmt_schedule", {kAdamLrSchedule}, RuleKind::OneOf, {}, {"gnmt"}, {}, true, kV07},
      {"*", "gnmt.warmup_steps_at_least_0", {kOptLearningRateWarmupSteps}, RuleKind::AtLeast, {0}, {}, {}, true, kV07},
      {"*", "gnmt.remain_steps_at_least_0", {kOptLearningRateRemainSteps}, RuleKind::AtLeast, {0}, {}, {}, true, kV07},
      {"*", "gnmt.decay_interval_at_least_1", {kOptLearningRateDecayInterval}, RuleKind::AtLeast, {1}, {}, {}, true, kV07},
      {"*", "gnmt.decay_steps_at_least_0", {kOptLearningRateDecaySteps}, RuleKind::AtLeast, {0}, {}, {}, true, kV07},
      {"*", "gnmt.decay_factor_positive", {kOptLearningRateDecayFactor}, RuleKind::AtLeast, {1e-12}, {}, {}, true, kV07},
      {"*", "gnmt.decay_factor_at_most_1", {kOptLearningRateDecayFactor}, RuleKind::AtMost, {1}, {}, {}, true, kV07},
      {"*", "gnmt.max_sequence_length_positive", {kMaxSequenceLength}, RuleKind::AtLeast, {1}, {}, {}, true, kV07},
      {"*", "gnmt.max_sequence_method", {kMaxSequenceMethod}, RuleKind::OneOf, {}, {"truncate", "discard"}, {}, true, kV07},
      {"*", "gnmt.eval_beam_size_positive", {kEvalBeamSize}, RuleKind::AtLeast, {1}, {}, {}, true, kOurs},
      {"*", "gnmt.grad_clip_norm_at_least_0", {kGradClipNorm}, RuleKind::AtLeast, {0}, {}, {}, true, kOurs},
  };
  s.closed_log_keys = {{kAdam,
                        {kOptBaseLearningRate, kOptLearningRateAltDecayFunc, kOptLearningRateDecayFactor,
                         kOptLearningRateDecayInterval, kOptLearningRateDecaySteps, kOptLearningRateRemainSteps,
                         kMaxSequenceLength, kOptLearningRateAltWarmupFunc, kOptLearningRateWarmupSteps}}};
  e.prepare_help = "mini: Debian's trans-de-en dictionary (default /usr/share/trans/de-en; --from another copy); "
                   "reference: --from-parallel SRC TGT (WMT16 En-De plain text) [--test-parallel SRC TGT]";
  e.prepare = &prepare_gnmt;
  e.check_config = &check_gnmt_config;
  e.check_data = &check_gnmt_data;
  e.make = &make_gnmt_workload;
  return e;
}

}  // namespace

const WorkloadEntry& gnmt_entry() {
  static const WorkloadEntry entry = make_entry();
  return entry;
}

}  // namespace mlpd
