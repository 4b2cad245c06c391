#include "mlperf/rules.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/check.h"
#include "mlperf/benchmark_spec.h"
#include "mlperf/keys.h"

namespace mlpd {
namespace {

using namespace keys;

constexpr const char* kCommon = "mlperf-dist: every benchmark";

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


std::string when_text(const RuleRow& r) {
  std::string s;
  for (const auto& c : r.when) {
    s += s.empty() ? "when " : " and ";
    s += std::string(c.key) + " " + op_text(c.op) + " " + (c.str ? std::string(c.str) : num_text(c.num));
  }
  return s;
}

// "" when the value satisfies the row, else what is wrong ("is not a multiple of 0.001").
std::string violation_of(const RuleRow& r, const nlohmann::json& v, const nlohmann::json& config, RunShape shape) {
  if (r.kind == RuleKind::OneOf) {
    std::string set;
    for (const char* s : r.strs) set += std::string(set.empty() ? "" : ", ") + s;
    if (v.is_string())
      for (const char* s : r.strs)
        if (v.get<std::string>() == s) return "";
    return "is not one of {" + set + "}";
  }
  if (r.kind == RuleKind::ElementsMultipleOf) {
    const std::string want = "a list of " + std::to_string(r.nums.size()) + " numbers";
    if (!v.is_array() || v.size() != r.nums.size()) return "is not " + want;
    for (size_t i = 0; i < r.nums.size(); ++i) {
      if (!v[i].is_number() || v[i].is_boolean()) return "is not " + want;
      if (!is_integer(v[i].get<double>() / r.nums[i]))
        return "has element " + std::to_string(i) + " not a multiple of " + num_text(r.nums[i]);
    }
    return "";
  }
  if (!v.is_number() || v.is_boolean()) return "is not a number";
  const double x = v.get<double>();
  if (r.kind == RuleKind::OneOfNumbers) {
    for (double p : r.nums)
      if (x == p) return "";
    std::string set;
    for (double p : r.nums) set += (set.empty() ? "" : ", ") + num_text(p);
    return "is not one of {" + set + "}";
  }
  if (r.kind == RuleKind::MultipleOfRanks) {
    const auto ranks = static_cast<double>(shape.ranks);
    return (x >= ranks && is_integer(x / ranks)) ? ""
                                                 : "is not a positive multiple of the " + num_text(ranks) + " ranks";
  }
  if (r.kind == RuleKind::DividesLocalBatch) {
    const char* of = r.strs.at(0);
    if (!config.contains(of) || !config.at(of).is_number_integer()) return std::string("needs an integer ") + of;
    const int64_t global = config.at(of).get<int64_t>();
    if (global % shape.ranks != 0) return "";  // the batch's own row reports that
    const int64_t local = global / shape.ranks;
    if (x == 0) return "";
    return (x > 0 && is_integer(x) && local % static_cast<int64_t>(x) == 0)
               ? ""
               : "does not divide the per-rank batch " + std::to_string(local) + " (" + of + " " +
                     std::to_string(global) + " over " + std::to_string(shape.ranks) + " ranks)";
  }
  const double p = r.nums.at(0);
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
    case RuleKind::OneOfNumbers:
    case RuleKind::ElementsMultipleOf:
    case RuleKind::MultipleOfRanks:
    case RuleKind::DividesLocalBatch:
      break;
  }
  return "";
}

bool scale_matches(const char* row_scale, const std::string& scale) {
  return std::string(row_scale) == "*" || scale == row_scale;
}

bool rank_dependent(const RuleRow& r) {
  return r.kind == RuleKind::MultipleOfRanks || r.kind == RuleKind::DividesLocalBatch;
}

template <class F>
void for_each_row(const BenchmarkSpec& b, const std::string& scale, F f) {
  for (const auto& r : common_rule_rows())
    if (scale_matches(r.scale, scale)) f(r);
  for (const auto& r : b.rules)
    if (scale_matches(r.scale, scale)) f(r);
}

std::string kind_text(const RuleRow& r) {
  std::string set;
  for (const char* s : r.strs) set += std::string(set.empty() ? "" : ", ") + s;
  switch (r.kind) {
    case RuleKind::OneOf: return "one of {" + set + "}";
    case RuleKind::Equals: return "= " + num_text(r.nums.at(0));
    case RuleKind::MultipleOf: return "a multiple of " + num_text(r.nums.at(0));
    case RuleKind::Pow2Times: return num_text(r.nums.at(0)) + " * 2^N";
    case RuleKind::AtLeast: return ">= " + num_text(r.nums.at(0));
    case RuleKind::AtMost: return "<= " + num_text(r.nums.at(0));
    case RuleKind::OneOfNumbers: {
      std::string nums;
      for (double p : r.nums) nums += (nums.empty() ? "" : ", ") + num_text(p);
      return "one of {" + nums + "}";
    }
    case RuleKind::ElementsMultipleOf: {
      std::string nums;
      for (double p : r.nums) nums += (nums.empty() ? "" : ", ") + num_text(p);
      return "a list whose elements are multiples of (" + nums + ")";
    }
    case RuleKind::MultipleOfRanks: return "a positive multiple of the rank count";
    case RuleKind::DividesLocalBatch: return std::string("0 or a divisor of ") + r.strs.at(0) + " / ranks";
  }
  return "?";
}

}  // namespace

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

const std::vector<RuleRow>& common_rule_rows() {
  static const std::vector<RuleRow> rows = {
      {"*", "global_batch_size_positive", {kGlobalBatchSize}, RuleKind::AtLeast, {1}, {}, {}, true, kCommon},
      {"*", "global_batch_size_multiple_of_ranks", {kGlobalBatchSize}, RuleKind::MultipleOfRanks, {}, {}, {},
       true, "data parallelism: every rank takes an equal share of each global batch, at least one sample"},
      {"*", "max_epochs_positive", {kMaxEpochs}, RuleKind::AtLeast, {1}, {}, {}, false, kCommon},
  };
  return rows;
}

const ScaleSpec& find_scale(const BenchmarkSpec& b, const std::string& scale) {
  std::string names;
  for (const auto& s : b.scales) {
    if (s.name == scale) return s;
    names += (names.empty() ? "" : ", ") + s.name;
  }
  throw UserError("unknown scale '" + scale + "' for " + b.name + " (available: " + names + ")", 2);
}

std::vector<std::string> required_log_keys(const BenchmarkSpec& b, const std::string& opt_name) {
  for (const auto& k : b.closed_log_keys)
    if (k.opt_name == opt_name) return k.keys;
  return {};
}

bool metric_reached(const MetricSpec& m, double value, double target) {
  return m.higher_is_better ? value >= target : value <= target;
}

std::optional<std::vector<double>> logged_metric_values(const MetricSpec& m, const nlohmann::json& value) {
  if (m.parts.empty()) {
    if (!value.is_number() || value.is_boolean()) return std::nullopt;
    return std::vector<double>{value.get<double>()};
  }
  if (!value.is_object() || value.size() != m.parts.size()) return std::nullopt;
  std::vector<double> out;
  for (const std::string& p : m.parts) {
    auto it = value.find(p);
    if (it == value.end() || !it->is_number() || it->is_boolean()) return std::nullopt;
    out.push_back(it->get<double>());
  }
  return out;
}

bool metric_values_reached(const MetricSpec& m, const std::vector<double>& values, const std::vector<double>& targets) {
  if (values.size() != targets.size() || values.empty()) return false;
  for (size_t i = 0; i < values.size(); ++i)
    if (!metric_reached(m, values[i], targets[i])) return false;
  return true;
}

nlohmann::json metric_log_value(const MetricSpec& m, double metric, const std::vector<double>& secondary) {
  if (m.parts.empty()) return metric;
  nlohmann::json v = nlohmann::json::object();
  v[m.parts[0]] = metric;
  for (size_t i = 1; i < m.parts.size(); ++i) v[m.parts[i]] = secondary.at(i - 1);
  return v;
}

std::vector<double> scale_targets(const ScaleSpec& s, double test_target) {
  std::vector<double> t{s.target};
  t.insert(t.end(), s.more_targets.begin(), s.more_targets.end());
  if (test_target > 0.0) std::fill(t.begin(), t.end(), test_target);
  return t;
}

std::vector<RuleViolation> check_rules(const BenchmarkSpec& b, const std::string& scale,
                                       const nlohmann::json& config, RunShape shape) {
  find_scale(b, scale);
  std::vector<RuleViolation> out;
  for_each_row(b, scale, [&](const RuleRow& r) {
    if (rank_dependent(r) && shape.ranks <= 0) return;
    bool applies = true;
    for (const auto& c : r.when) applies = applies && cond_holds(c, config);
    if (!applies) return;
    std::string suffix = " (" + std::string(r.source) + ")";
    bool any = false;
    for (const char* key : r.keys) {
      if (!config.is_object() || !config.contains(key)) continue;
      any = true;
      const auto& v = config.at(key);
      std::string what = violation_of(r, v, config, shape);
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
  });
  return out;
}

void enforce_rules(const BenchmarkSpec& b, const std::string& scale, const nlohmann::json& config, RunShape shape) {
  auto v = check_rules(b, scale, config, shape);
  if (v.empty()) return;
  std::string msg;
  for (const auto& x : v) msg += (msg.empty() ? "" : "\n") + x.message;
  throw RuleError(msg);
}

std::string describe_rules(const BenchmarkSpec& b, const std::string& scale) {
  const ScaleSpec& sc = find_scale(b, scale);
  const char* dir = b.metric.higher_is_better ? ">= " : "<= ";
  std::string target_text = dir + num_text(sc.target);
  if (!b.metric.parts.empty()) {
    const std::vector<double> t = scale_targets(sc);
    target_text.clear();
    for (size_t i = 0; i < b.metric.parts.size() && i < t.size(); ++i)
      target_text += (i ? " and " : "") + b.metric.parts[i] + " " + dir + num_text(t[i]);
  }
  std::string out = b.name + " at scale " + scale + ": metric " + b.metric.name + " (" + b.metric.unit + ", " +
                    target_text + ", range [" +
                    num_text(b.metric.min) + ", " + num_text(b.metric.max) + "]; " + sc.target_source + ")\n";
  for_each_row(b, scale, [&](const RuleRow& r) {
    std::string keys_text;
    for (const char* k : r.keys) keys_text += (keys_text.empty() ? "" : " / ") + std::string(k);
    std::string when = when_text(r);
    out += "  " + std::string(r.name) + ": " + keys_text + " " + kind_text(r) + (when.empty() ? "" : ", " + when) +
           (r.required ? "" : " (when set)") + "  [" + r.source + "]\n";
  });
  return out;
}

}  // namespace mlpd
