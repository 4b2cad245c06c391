// MLPerf rules as data: one row per constraint, naming the rule, the key(s) it constrains, the
// constraint, and when it applies. Common rows (every benchmark) live in rules.cpp; each benchmark
// brings its own rows in its BenchmarkSpec (the MLPerf v0.7 tunable hyperparameter table).
// Rank-dependent rows (batch divisible by the ranks, batch-norm span dividing the per-rank batch)
// are rows like the others; they apply when the rank count is known (a run), not to a log.
// Adding a rule is adding a row; a violation names its rule.
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
  OneOfNumbers,        // value is one of `nums`
  ElementsMultipleOf,  // value is a list of nums.size() numbers, element i a multiple of nums[i]
  // Rank-dependent (skipped when the rank count is unknown):
  MultipleOfRanks,    // value is a positive multiple of the rank count
  DividesLocalBatch,  // value is 0 (= the per-rank batch) or divides (strs[0] / ranks), an integer
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

// Whether `c` holds in `config` (an absent key, or a value of the other type, does not).
bool cond_holds(const RuleCond& c, const nlohmann::json& config);

struct RuleRow {
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

struct BenchmarkSpec;

// What a rule may depend on beyond the config: the run's rank count (0: unknown, as in a log).
struct RunShape {
  int ranks = 0;
};

// The rows every benchmark shares (global batch positive and divisible by the ranks, max_epochs).
const std::vector<RuleRow>& common_rule_rows();

// Violations of the common rows and the benchmark's rows for `scale` by config (a flat JSON
// object). scale must be one of the benchmark's scales (else UserError).
std::vector<RuleViolation> check_rules(const BenchmarkSpec& b, const std::string& scale,
                                       const nlohmann::json& config, RunShape shape = {});
// Throws RuleError (exit code 2) listing every violation, one per line, if there is any.
void enforce_rules(const BenchmarkSpec& b, const std::string& scale, const nlohmann::json& config,
                   RunShape shape = {});

// The rows that apply to (benchmark, scale) as text, one per line: what `mlperf-dist rules` prints.
std::string describe_rules(const BenchmarkSpec& b, const std::string& scale);

}  // namespace mlpd
