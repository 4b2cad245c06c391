// What the MLPerf side (rules, checker, targets) knows of one benchmark, as plain data: its
// metric, its scales with their embedded defaults, quality targets and dataset sizes, its rows of
// the rules table and the keys a closed-division log must carry. Each workload folder fills one
// in (src/workloads/<name>/); mlperf/ reads it and never knows which workloads exist.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mlperf/rules.h"

namespace mlpd {

struct MetricSpec {
  std::string name;                  // "top1", "hr@10", "bleu"
  std::string mllog_key;             // the MLLOG key carrying it: keys::kEvalAccuracy
  std::string unit;                  // "fraction", "BLEU", "percent"
  double min = 0.0;                  // declared range, both ends included: a logged value
  double max = 1.0;                  //   outside it is an error in `check`
  bool higher_is_better = true;
  std::vector<std::string> secondary;  // reported beside the metric, never a target ("ndcg@10")
  // A metric of several values logged as one object, each with its own target (Mask R-CNN's
  // {"BBOX": box AP, "SEGM": mask AP}): parts[0] names the metric itself, parts[i] (i >= 1) the
  // value secondary[i - 1]. Empty: the metric is one number.
  std::vector<std::string> parts;
};

// True when `value` meets `target` in the metric's direction.
bool metric_reached(const MetricSpec& m, double value, double target);
// The values of a logged metric: {the number}, or the object's parts in MetricSpec::parts order;
// nullopt when the value has another form (a number for a metric with parts, an object missing a
// part or holding a non-number, or the other way round).
std::optional<std::vector<double>> logged_metric_values(const MetricSpec& m, const nlohmann::json& value);
// True when values[i] meets targets[i] for every i (both of the same size).
bool metric_values_reached(const MetricSpec& m, const std::vector<double>& values, const std::vector<double>& targets);
// What the trainer logs for an evaluation: the number, or the object of parts built from the
// metric and its secondaries.
nlohmann::json metric_log_value(const MetricSpec& m, double metric, const std::vector<double>& secondary);

// Reference convergence points: epochs to reach the target with the reference config at one
// global batch size, one entry per seed (MLPerf's RCPs; ours for the mini scale, calibrated).
struct RcpPoint {
  int64_t global_batch = 0;
  std::vector<double> epochs;
  std::string source;          // where the numbers come from
};

struct ScaleSpec {
  std::string name;            // "mini" or "reference"
  std::string defaults_yaml;   // the embedded config: its keys are the only keys allowed
  double target = 0.0;         // quality target (direction from MetricSpec)
  int64_t train_samples = 0;   // the logged train_samples / eval_samples must be these (0: any,
                               //   where the size depends on the user's own files)
  int64_t eval_samples = 0;
  std::string target_source;   // where the target comes from, shown by `rules`
  int result_runs = 5;         // runs a result needs (MLPerf: resnet 5, ncf 50, ...), scored by olympic mean
  std::vector<RcpPoint> rcps;  // by global batch, ascending
  std::vector<double> more_targets;  // with MetricSpec::parts: the targets of parts[1..]
};
// Every target of a scale in MetricSpec::parts order: {target} or {target, more_targets...}; a
// test target (> 0) replaces each of them.
std::vector<double> scale_targets(const ScaleSpec& s, double test_target = 0.0);

// Keys a closed-division log trained with `opt_name` must log exactly once, beyond the common ones.
struct ClosedLogKeys {
  std::string opt_name;
  std::vector<std::string> keys;
};

struct BenchmarkSpec {
  std::string name;            // "resnet": the submission_benchmark value and the CLI name
  std::string summary;         // one line for --help
  MetricSpec metric;
  std::vector<ScaleSpec> scales;
  std::vector<RuleRow> rules;  // this benchmark's rows (common rows are added by check_rules)
  std::vector<ClosedLogKeys> closed_log_keys;
};

// The scale's row; UserError (exit 2) naming the scales the benchmark has.
const ScaleSpec& find_scale(const BenchmarkSpec& b, const std::string& scale);
std::vector<std::string> required_log_keys(const BenchmarkSpec& b, const std::string& opt_name);

// How the checker finds a benchmark by name: nullptr when unknown.
using BenchmarkLookup = std::function<const BenchmarkSpec*(const std::string& name)>;

}  // namespace mlpd
