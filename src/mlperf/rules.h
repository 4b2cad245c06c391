// MLPerf rules as data. Three tables in rules.cpp, each a block of rows per benchmark:
//   - hyperparameter rules (the MLPerf v0.7 tunable hyperparameter table): one row per constraint,
//     naming the rule, the key(s) it constrains, the constraint, and when it applies;
//   - quality targets and dataset sizes per (benchmark, scale);
//   - keys a closed-division log must carry exactly once per (benchmark, optimizer).
// Adding a rule is adding a row. A config (or the hyperparameters read back from a result log)
// is checked against the rows of its benchmark and scale; a violation names its rule.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mlpd {

enum class RuleKind {
  OneOf,       // value (a string) is one of `strs`
  Equals,      // value == nums[0] (relative tolerance 1e-9)
  MultipleOf,  // value / nums[0] is an integer (tolerance 1e-5, as the official checker)
  Pow2Times,   // value == nums[0] * 2^N, N an integer (log2 within 1e-5)
  AtLeast,     // value >= nums[0]
  AtMost,      // value <= nums[0]
};

enum class CondOp { Eq, Ne, Lt, Ge };

// `key op value`: value is `str` when str is not null, else `num`. A condition on a key that is
// absent from the config is false.
struct RuleCond {
  const char* key;
  CondOp op;
  const char* str;
  double num;
};

struct RuleRow {
  const char* benchmark;          // "resnet"
  const char* scale;              // "mini", "reference" or "*"
  const char* name;               // "resnet.sgd_lr_multiple_of_0.001"
  std::vector<const char*> keys;  // spellings of the constrained key (config's, then the log's);
                                  // every one present is checked
  RuleKind kind;
  std::vector<double> nums;
  std::vector<const char*> strs;
  std::vector<RuleCond> when;  // all must hold for the row to apply
  bool required;               // a missing key (no spelling present) is a violation
  const char* source;          // where the rule comes from, shown in the message
};

struct RuleViolation {
  std::string rule;     // row name
  std::string key;      // the key as found (or the first spelling when missing)
  std::string value;    // the offending value as text ("" when missing)
  std::string message;  // "rule <name>: <key> = <value> <what is wrong> (<source>)"
};

const std::vector<RuleRow>& rule_table();

// Violations of the rows for (benchmark, scale) by config (a flat JSON object). A benchmark with
// no rows yields none. scale must be "mini" or "reference" (else UserError).
std::vector<RuleViolation> check_rules(const std::string& benchmark, const std::string& scale,
                                       const nlohmann::json& config);
// Throws RuleError (exit code 2) listing every violation, one per line, if there is any.
void enforce_rules(const std::string& benchmark, const std::string& scale, const nlohmann::json& config);

struct BenchmarkTarget {
  const char* benchmark;
  const char* scale;
  const char* metric_key;  // the MLLOG key carrying the metric: "eval_accuracy"
  double target;           // quality to reach (>=)
  int64_t train_samples;   // the logged train_samples / eval_samples must be these
  int64_t eval_samples;
  const char* source;
};

const std::vector<BenchmarkTarget>& target_table();
// UserError when (benchmark, scale) has no row.
const BenchmarkTarget& benchmark_target(const std::string& benchmark, const std::string& scale);
double quality_target(const std::string& benchmark, const std::string& scale);

// Keys a closed-division log of `benchmark` trained with `opt_name` must log exactly once, beyond
// the common ones (submission_*, init_stop, run_start, run_stop, seed, global_batch_size, opt_name,
// train_samples, eval_samples). From the 0.7.0 checker's closed_<benchmark>[_<opt>].yaml.
std::vector<std::string> required_log_keys(const std::string& benchmark, const std::string& opt_name);

}  // namespace mlpd
