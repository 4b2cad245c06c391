#include "mlperf/rules.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/check.h"
#include "mlperf/keys.h"

namespace mlpd {
namespace {

using namespace keys;

constexpr const char* kV07Table = "MLPerf v0.7 tunable hyperparameters";
constexpr const char* kV07Checker = "MLPerf v0.7 compliance checker, closed_resnet_sgd.yaml";

const RuleCond kIfSgd{kOptName, CondOp::Eq, kSgd, 0};
const RuleCond kIfLars{kOptName, CondOp::Eq, kLars, 0};
constexpr const char* kV05Ncf = "MLPerf v0.5 NCF (reference: Adam, 4 training negatives, 999 eval negatives)";

bool is_integer(double x) { return std::fabs(std::round(x) - x) < 1e-5; }

std::string num_text(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", x);
  return buf;
}

std::string value_text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

const char* op_text(CondOp op) {
  switch (op) {
    case CondOp::Eq: return "==";
    case CondOp::Ne: return "!=";
    case CondOp::Lt: return "<";
    case CondOp::Ge: return ">=";
  }
  return "?";
}

bool cond_holds(const RuleCond& c, const nlohmann::json& config) {
  if (!config.is_object() || !config.contains(c.key)) return false;
  const auto& v = config.at(c.key);
  if (c.str) {
    if (!v.is_string()) return false;
    bool eq = v.get<std::string>() == c.str;
    return c.op == CondOp::Eq ? eq : c.op == CondOp::Ne ? !eq : false;
  }
  if (!v.is_number()) return false;
  double x = v.get<double>();
  switch (c.op) {
    case CondOp::Eq: return x == c.num;
    case CondOp::Ne: return x != c.num;
    case CondOp::Lt: return x < c.num;
    case CondOp::Ge: return x >= c.num;
  }
  return false;
}

std::string when_text(const RuleRow& r) {
  std::string s;
  for (const auto& c : r.when) {
    s += s.empty() ? "when " : " and ";
    s += std::string(c.key) + " " + op_text(c.op) + " " + (c.str ? std::string(c.str) : num_text(c.num));
  }
  return s;
}

// "" when the value satisfies the row, else what is wrong ("is not a multiple of 0.001").
std::string violation_of(const RuleRow& r, const nlohmann::json& v) {
  if (r.kind == RuleKind::OneOf) {
    std::string set;
    for (const char* s : r.strs) set += std::string(set.empty() ? "" : ", ") + s;
    if (v.is_string())
      for (const char* s : r.strs)
        if (v.get<std::string>() == s) return "";
    return "is not one of {" + set + "}";
  }
  if (!v.is_number() || v.is_boolean()) return "is not a number";
  double x = v.get<double>(), p = r.nums.at(0);
  switch (r.kind) {
    case RuleKind::Equals: {
      bool ok = p == 0 ? x == 0 : std::fabs(x - p) <= 1e-9 * std::max(std::fabs(x), std::fabs(p));
      return ok ? "" : "must be " + num_text(p);
    }
    case RuleKind::MultipleOf:
      return is_integer(x / p) ? "" : "is not a multiple of " + num_text(p);
    case RuleKind::Pow2Times:
      return (x > 0 && is_integer(std::log2(x / p))) ? "" : "is not " + num_text(p) + " * 2^N for an integer N";
    case RuleKind::AtLeast:
      return x >= p ? "" : "must be at least " + num_text(p);
    case RuleKind::AtMost:
      return x <= p ? "" : "must be at most " + num_text(p);
    case RuleKind::OneOf:
      break;
  }
  return "";
}

bool scale_matches(const char* row_scale, const std::string& scale) {
  return std::string(row_scale) == "*" || scale == row_scale;
}

void check_scale(const std::string& scale) {
  if (scale != "mini" && scale != "reference")
    throw UserError("unknown scale '" + scale + "' (expected mini or reference)", 2);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The rules. One block per benchmark; scale "*" holds at both scales.
// ---------------------------------------------------------------------------------------------
const std::vector<RuleRow>& rule_table() {
  static const std::vector<RuleRow> rows = {
      // ---- resnet (MLPerf v0.7: SGD or LARS) ----
      {kResnet, "*", "resnet.opt_name_sgd_or_lars", {kOptName}, RuleKind::OneOf, {}, {kSgd, kLars}, {},
       true, kV07Table},
      {kResnet, "*", "resnet.global_batch_size_positive", {kGlobalBatchSize}, RuleKind::AtLeast, {1}, {}, {},
       true, kV07Table},
      {kResnet, "*", "resnet.sgd_lr_multiple_of_0.001", {kOptBaseLearningRate, kSgdOptBaseLearningRate},
       RuleKind::MultipleOf, {0.001}, {}, {kIfSgd}, true, kV07Table},
      {kResnet, "*", "resnet.sgd_weight_decay_1e-4_times_2^N", {kOptWeightDecay, kSgdOptWeightDecay},
       RuleKind::Pow2Times, {1e-4}, {}, {kIfSgd}, true, kV07Table},
      {kResnet, "*", "resnet.sgd_end_lr_1e-4", {kSgdOptEndLearningRate}, RuleKind::Equals, {1e-4}, {}, {kIfSgd},
       false, kV07Checker},
      {kResnet, "*", "resnet.lars_weight_decay_1e-4_times_2^N", {kLarsOptWeightDecay}, RuleKind::Pow2Times,
       {1e-4}, {}, {kIfLars}, true, kV07Table},
      {kResnet, "*", "resnet.lars_end_lr_1e-4", {kLarsOptEndLearningRate}, RuleKind::Equals, {1e-4}, {},
       {kIfLars}, true, kV07Table},
      {kResnet, "*", "resnet.lars_poly_power_2", {kLarsOptLearningRateDecayPolyPower}, RuleKind::Equals, {2}, {},
       {kIfLars}, true, kV07Table},
      {kResnet, "*", "resnet.lars_epsilon_0", {kLarsEpsilon}, RuleKind::Equals, {0}, {}, {kIfLars}, true,
       kV07Table},
      {kResnet, "*", "resnet.lars_momentum_0.9_below_32k_batch", {kLarsOptMomentum}, RuleKind::Equals, {0.9}, {},
       {kIfLars, {kGlobalBatchSize, CondOp::Lt, nullptr, 32768}}, true, kV07Table},
      // ---- ncf (MLPerf v0.5 NCF row: Adam; LR, beta_1, beta_2, epsilon and the batch tunable) ----
      {kNcf, "*", "ncf.opt_name_adam_or_lazy_adam", {kOptName}, RuleKind::OneOf, {}, {kAdam, kLazyAdam}, {}, true,
       kV05Ncf},
      {kNcf, "*", "ncf.global_batch_size_positive", {kGlobalBatchSize}, RuleKind::AtLeast, {1}, {}, {}, true,
       kV05Ncf},
      {kNcf, "*", "ncf.lr_positive", {kOptBaseLearningRate}, RuleKind::AtLeast, {1e-12}, {}, {}, true, kV05Ncf},
      {kNcf, "*", "ncf.adam_beta_1_at_least_0", {kOptAdamBeta1}, RuleKind::AtLeast, {0}, {}, {}, true, kV05Ncf},
      {kNcf, "*", "ncf.adam_beta_1_below_1", {kOptAdamBeta1}, RuleKind::AtMost, {0.999999}, {}, {}, true, kV05Ncf},
      {kNcf, "*", "ncf.adam_beta_2_at_least_0", {kOptAdamBeta2}, RuleKind::AtLeast, {0}, {}, {}, true, kV05Ncf},
      {kNcf, "*", "ncf.adam_beta_2_below_1", {kOptAdamBeta2}, RuleKind::AtMost, {0.999999}, {}, {}, true, kV05Ncf},
      {kNcf, "*", "ncf.adam_epsilon_positive", {kOptAdamEpsilon}, RuleKind::AtLeast, {1e-30}, {}, {}, true, kV05Ncf},
      // Not tunable in MLPerf's NCF: 4 training negatives per positive (a config key; not logged).
      {kNcf, "*", "ncf.train_negatives_4", {"train_negatives"}, RuleKind::Equals, {4}, {}, {}, false, kV05Ncf},
  };
  return rows;
}

const std::vector<BenchmarkTarget>& target_table() {
  static const std::vector<BenchmarkTarget> rows = {
      {kResnet, "reference", kEvalAccuracy, 0.759, 1281167, 50000, "MLPerf v0.7 (ImageNet top-1)"},
      {kResnet, "mini", kEvalAccuracy, 0.90, 60000, 10000, "mlperf-dist mini (Fashion-MNIST top-1)"},
      // ncf: train_samples = training positives (ratings - users), eval_samples = users (each ranked
      // with its 999 negatives). Reference: MovieLens-20M (20,000,263 ratings, 138,493 users).
      {kNcf, "reference", kEvalAccuracy, 0.635, 19861770, 138493, "MLPerf v0.5 NCF (ml-20m HR@10)"},
      // Mini: ml-latest-small (100,004 ratings, 671 users); target calibrated in src/workloads/ncf/README.md.
      {kNcf, "mini", kEvalAccuracy, 0.27, 99333, 671, "mlperf-dist mini (ml-latest-small HR@10, calibrated)"},
  };
  return rows;
}

std::vector<std::string> required_log_keys(const std::string& benchmark, const std::string& opt_name) {
  struct Row {
    const char* benchmark;
    const char* opt_name;
    std::vector<const char*> keys;
  };
  static const std::vector<Row> rows = {
      {kResnet, kLars,
       {kLarsOptBaseLearningRate, kLarsOptEndLearningRate, kLarsOptLearningRateDecayPolyPower,
        kLarsOptLearningRateDecaySteps, kLarsEpsilon, kLarsOptLearningRateWarmupEpochs, kLarsOptMomentum,
        kLarsOptWeightDecay}},
      {kResnet, kSgd,
       {kSgdOptBaseLearningRate, kSgdOptEndLearningRate, kSgdOptLearningRateDecayPolyPower,
        kSgdOptLearningRateDecaySteps, kSgdOptWeightDecay, kSgdOptMomentum, kModelBnSpan,
        kOptLearningRateWarmupEpochs}},
      {kNcf, kAdam, {kOptBaseLearningRate, kOptAdamBeta1, kOptAdamBeta2, kOptAdamEpsilon}},
      {kNcf, kLazyAdam, {kOptBaseLearningRate, kOptAdamBeta1, kOptAdamBeta2, kOptAdamEpsilon}},
  };
  std::vector<std::string> out;
  for (const auto& r : rows)
    if (benchmark == r.benchmark && opt_name == r.opt_name) out.assign(r.keys.begin(), r.keys.end());
  return out;
}

std::vector<RuleViolation> check_rules(const std::string& benchmark, const std::string& scale,
                                       const nlohmann::json& config) {
  check_scale(scale);
  std::vector<RuleViolation> out;
  for (const auto& r : rule_table()) {
    if (benchmark != r.benchmark || !scale_matches(r.scale, scale)) continue;
    bool applies = true;
    for (const auto& c : r.when) applies = applies && cond_holds(c, config);
    if (!applies) continue;
    std::string suffix = " (" + std::string(r.source) + ")";
    bool any = false;
    for (const char* key : r.keys) {
      if (!config.is_object() || !config.contains(key)) continue;
      any = true;
      const auto& v = config.at(key);
      std::string what = violation_of(r, v);
      if (what.empty()) continue;
      std::string text = value_text(v);
      out.push_back({r.name, key, text, "rule " + std::string(r.name) + ": " + key + " = " + text + " " + what + suffix});
    }
    if (!any && r.required) {
      std::string when = when_text(r);
      out.push_back({r.name, r.keys.at(0), "",
                     "rule " + std::string(r.name) + ": " + r.keys.at(0) + " is not set" +
                         (when.empty() ? "" : " (required " + when + ")") + suffix});
    }
  }
  return out;
}

void enforce_rules(const std::string& benchmark, const std::string& scale, const nlohmann::json& config) {
  auto v = check_rules(benchmark, scale, config);
  if (v.empty()) return;
  std::string msg;
  for (const auto& x : v) msg += (msg.empty() ? "" : "\n") + x.message;
  throw RuleError(msg);
}

const BenchmarkTarget& benchmark_target(const std::string& benchmark, const std::string& scale) {
  for (const auto& t : target_table())
    if (benchmark == t.benchmark && scale == t.scale) return t;
  throw UserError("no quality target for benchmark '" + benchmark + "' at scale '" + scale + "'", 2);
}

double quality_target(const std::string& benchmark, const std::string& scale) {
  return benchmark_target(benchmark, scale).target;
}

}  // namespace mlpd
