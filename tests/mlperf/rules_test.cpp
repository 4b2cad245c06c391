#include <gtest/gtest.h>

#include "core/check.h"
#include "log_fixture.h"
#include "mlperf/keys.h"
#include "mlperf/rules.h"
#include "workloads/registry.h"

namespace mlpd {
namespace {

using namespace mlpd::testing;
using namespace mlpd::keys;

const BenchmarkSpec& resnet() { return find_workload("resnet").spec; }

json lars_config() {
  return {{kOptName, kLars},           {kGlobalBatchSize, 3072},
          {kLarsOptBaseLearningRate, 9.1}, {kLarsOptEndLearningRate, 0.0001},
          {kLarsOptLearningRateDecayPolyPower, 2}, {kLarsEpsilon, 0.0},
          {kLarsOptMomentum, 0.9},     {kLarsOptWeightDecay, 0.00005 * 2}};
}

json sgd_config() {
  return {{kOptName, kSgd}, {kGlobalBatchSize, 256}, {kOptBaseLearningRate, 0.1}, {kOptWeightDecay, 0.0001}};
}

// The names of the rules violated.
std::vector<std::string> broken(const json& config, const std::string& scale = "reference") {
  std::vector<std::string> names;
  for (const auto& v : check_rules(resnet(), scale, config)) names.push_back(v.rule);
  return names;
}

using Names = std::vector<std::string>;

TEST(Rules, valid_configs_pass_at_both_scales) {
  for (const char* scale : {"mini", "reference"}) {
    EXPECT_EQ(broken(lars_config(), scale), Names{}) << scale;
    EXPECT_EQ(broken(sgd_config(), scale), Names{}) << scale;
  }
  EXPECT_NO_THROW(enforce_rules(resnet(), "mini", sgd_config()));
}

TEST(Rules, sgd_learning_rate_must_be_a_multiple_of_0_001) {
  json c = sgd_config();
  c[kOptBaseLearningRate] = 0.1234;
  auto v = check_rules(resnet(), "mini", c);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].message,
            "rule resnet.sgd_lr_multiple_of_0.001: opt_base_learning_rate = 0.1234 is not a multiple of 0.001 "
            "(MLPerf v0.7 tunable hyperparameters)");
  try {
    enforce_rules(resnet(), "mini", c);
    FAIL() << "no RuleError";
  } catch (const RuleError& e) {
    EXPECT_EQ(e.exit_code, 2);
    EXPECT_EQ(std::string(e.what()), v[0].message);
  }
  c[kOptBaseLearningRate] = 0.256;
  EXPECT_EQ(broken(c), Names{});
  // The logged spelling is checked as well.
  json logged = {{kOptName, kSgd}, {kGlobalBatchSize, 256}, {kSgdOptBaseLearningRate, 0.1234},
                 {kSgdOptWeightDecay, 0.0001}};
  EXPECT_EQ(broken(logged), Names{"resnet.sgd_lr_multiple_of_0.001"});
}

TEST(Rules, weight_decay_must_be_1e4_times_a_power_of_two) {
  for (auto [key, cfg] : {std::pair{kOptWeightDecay, sgd_config()}, std::pair{kLarsOptWeightDecay, lars_config()}}) {
    std::string rule = cfg[kOptName] == kSgd ? "resnet.sgd_weight_decay_1e-4_times_2^N"
                                             : "resnet.lars_weight_decay_1e-4_times_2^N";
    cfg[key] = 3e-4;
    EXPECT_EQ(broken(cfg), Names{rule}) << key;
    cfg[key] = 4e-4;
    EXPECT_EQ(broken(cfg), Names{}) << key;
    cfg[key] = 5e-5;
    EXPECT_EQ(broken(cfg), Names{}) << key;
    cfg[key] = 0.0;
    EXPECT_EQ(broken(cfg), Names{rule}) << key;
  }
}

TEST(Rules, lars_fixed_values) {
  json c = lars_config();
  c[kLarsOptEndLearningRate] = 2e-4;
  auto v = check_rules(resnet(), "reference", c);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].rule, "resnet.lars_end_lr_1e-4");
  EXPECT_NE(v[0].message.find("lars_opt_end_learning_rate = 0.0002 must be 0.0001"), std::string::npos)
      << v[0].message;

  c = lars_config();
  c[kLarsOptLearningRateDecayPolyPower] = 1;
  EXPECT_EQ(broken(c), Names{"resnet.lars_poly_power_2"});
  c = lars_config();
  c[kLarsEpsilon] = 1e-9;
  EXPECT_EQ(broken(c), Names{"resnet.lars_epsilon_0"});
  c = lars_config();
  c.erase(kLarsEpsilon);
  EXPECT_EQ(broken(c), Names{"resnet.lars_epsilon_0"});
}

TEST(Rules, lars_momentum_is_fixed_only_below_32k_batch) {
  json c = lars_config();
  c[kLarsOptMomentum] = 0.95;
  EXPECT_EQ(broken(c), Names{"resnet.lars_momentum_0.9_below_32k_batch"});
  c[kGlobalBatchSize] = 32768;
  EXPECT_EQ(broken(c), Names{});
}

TEST(Rules, optimizer_must_be_sgd_or_lars) {
  json c = sgd_config();
  c[kOptName] = "adam";
  EXPECT_EQ(broken(c), Names{"resnet.opt_name_sgd_or_lars"});
}

TEST(Rules, rows_of_one_optimizer_ignore_the_other) {
  json c = sgd_config();
  c[kLarsOptEndLearningRate] = 0.5;  // present in the defaults but unused with sgd
  EXPECT_EQ(broken(c), Names{});
}

TEST(Rules, a_string_where_a_number_belongs_is_a_violation) {
  json c = sgd_config();
  c[kOptBaseLearningRate] = "0.1";
  auto v = check_rules(resnet(), "reference", c);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NE(v[0].message.find("is not a number"), std::string::npos);
}

TEST(Rules, unknown_scale_and_unknown_benchmark_are_errors) {
  EXPECT_THROW(check_rules(resnet(), "huge", sgd_config()), UserError);
  EXPECT_THROW(find_workload("nobench"), UserError);
  try {
    find_workload("nobench");
  } catch (const UserError& e) {
    EXPECT_EQ(e.exit_code, 2);
    EXPECT_NE(std::string(e.what()).find("resnet, ncf"), std::string::npos) << e.what();
  }
}

TEST(Rules, quality_targets_and_sizes_are_data) {
  EXPECT_DOUBLE_EQ(find_scale(resnet(), "reference").target, 0.759);
  EXPECT_DOUBLE_EQ(find_scale(resnet(), "mini").target, 0.90);
  EXPECT_EQ(find_scale(resnet(), "reference").train_samples, 1281167);
  EXPECT_EQ(find_scale(resnet(), "reference").eval_samples, 50000);
  EXPECT_EQ(find_scale(resnet(), "mini").train_samples, 60000);
  EXPECT_EQ(find_scale(resnet(), "mini").eval_samples, 10000);
  EXPECT_THROW(find_scale(resnet(), "huge"), UserError);
}

// Rank-dependent rows apply when the rank count is known (a run), never to a log.
TEST(Rules, global_batch_must_divide_over_the_ranks) {
  json c = sgd_config();  // global batch 256
  EXPECT_EQ(broken(c), Names{});
  auto v = check_rules(resnet(), "mini", c, RunShape{3});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].rule, "global_batch_size_multiple_of_ranks");
  EXPECT_NE(v[0].message.find("is not a positive multiple of the 3 ranks"), std::string::npos) << v[0].message;
  EXPECT_TRUE(check_rules(resnet(), "mini", c, RunShape{4}).empty());
  c[kGlobalBatchSize] = 2;  // fewer samples than ranks: a rank would have none
  EXPECT_EQ(check_rules(resnet(), "mini", c, RunShape{4}).size(), 1u);
}

TEST(Rules, bn_span_must_divide_the_per_rank_batch) {
  json c = sgd_config();  // 256 over 4 ranks: 64 per rank
  c[kModelBnSpan] = 32;
  EXPECT_TRUE(check_rules(resnet(), "mini", c, RunShape{4}).empty());
  c[kModelBnSpan] = 0;  // the whole per-rank batch
  EXPECT_TRUE(check_rules(resnet(), "mini", c, RunShape{4}).empty());
  c[kModelBnSpan] = 48;
  auto v = check_rules(resnet(), "mini", c, RunShape{4});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].rule, "resnet.model_bn_span_divides_local_batch");
  EXPECT_NE(v[0].message.find("does not divide the per-rank batch 64"), std::string::npos) << v[0].message;
  EXPECT_TRUE(check_rules(resnet(), "mini", c).empty()) << "no rank count: not checked";
}

TEST(Rules, every_row_is_well_formed) {
  auto well_formed = [](const RuleRow& r, const std::string& prefix) {
    EXPECT_FALSE(r.keys.empty()) << r.name;
    if (r.kind == RuleKind::OneOf || r.kind == RuleKind::DividesLocalBatch) {
      EXPECT_FALSE(r.strs.empty()) << r.name;
    } else if (r.kind == RuleKind::OneOfNumbers || r.kind == RuleKind::ElementsMultipleOf) {
      EXPECT_FALSE(r.nums.empty()) << r.name;
    } else if (r.kind != RuleKind::MultipleOfRanks) {
      EXPECT_EQ(r.nums.size(), 1u) << r.name;
    }
    EXPECT_TRUE(std::string(r.scale) == "*" || std::string(r.scale) == "mini" || std::string(r.scale) == "reference");
    if (!prefix.empty()) {
      EXPECT_EQ(std::string(r.name).rfind(prefix + ".", 0), 0u) << r.name;
    }
  };
  for (const auto& r : common_rule_rows()) well_formed(r, "");
  for (const WorkloadEntry* e : workload_entries())
    for (const auto& r : e->spec.rules) well_formed(r, e->spec.name);
}

// ssd's rows: max_samples one of {1, 50}; decay boundaries of closed_ssd.yaml's form (40+4k, 50+5k).
TEST(Rules, ssd_max_samples_and_boundary_epochs) {
  const BenchmarkSpec& ssd = find_workload("ssd").spec;
  auto names = [&](const json& c) {
    std::vector<std::string> n;
    for (const auto& v : check_rules(ssd, "mini", c)) n.push_back(v.rule);
    return n;
  };
  json c = {{kOptName, kSgd},
            {kGlobalBatchSize, 64},
            {kLrDecay, "ssd"},
            {kOptBaseLearningRate, 0.05},
            {kOptLearningRateDecayFactor, 0.1},
            {kMaxSamples, 1},
            {kOptLearningRateWarmupFactor, 0},
            {kOptLearningRateWarmupSteps, 300},
            {kOptLearningRateDecayBoundaryEpochs, {8, 10}}};
  EXPECT_EQ(names(c), Names{});
  c[kMaxSamples] = 50;
  EXPECT_EQ(names(c), Names{});
  c[kMaxSamples] = 10;
  EXPECT_EQ(names(c), Names{"ssd.max_samples_1_or_50"});
  c[kMaxSamples] = 1;
  c[kOptLearningRateDecayBoundaryEpochs] = {9, 10};
  EXPECT_EQ(names(c), Names{"ssd.decay_boundaries_40+4k_50+5k"});
  c[kOptLearningRateDecayBoundaryEpochs] = {8};
  EXPECT_EQ(names(c), Names{"ssd.decay_boundaries_40+4k_50+5k"});
  c[kOptLearningRateDecayBoundaryEpochs] = 8;
  EXPECT_EQ(names(c), Names{"ssd.decay_boundaries_40+4k_50+5k"});
  c[kOptLearningRateDecayBoundaryEpochs] = {44, 55};
  c[kOptLearningRateWarmupFactor] = 0.5;
  EXPECT_EQ(names(c), Names{"ssd.warmup_factor_integer"});
}

}  // namespace
}  // namespace mlpd

namespace mlpd {
namespace {

// A metric of two parts (Mask R-CNN's): logged as an object, reached only when every part is.
MetricSpec two_part_metric() {
  MetricSpec m;
  m.name = "mAP";
  m.secondary = {"SEGM", "AP50"};
  m.parts = {"BBOX", "SEGM"};
  return m;
}

TEST(MetricParts, LoggedValuesReadTheMetricsForm) {
  const MetricSpec m = two_part_metric();
  const auto v = logged_metric_values(m, nlohmann::json{{"SEGM", 0.3}, {"BBOX", 0.4}});
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, (std::vector<double>{0.4, 0.3}));  // in parts order, not the object's
  EXPECT_FALSE(logged_metric_values(m, nlohmann::json(0.4)).has_value());
  EXPECT_FALSE(logged_metric_values(m, nlohmann::json{{"BBOX", 0.4}}).has_value());
  EXPECT_FALSE(logged_metric_values(m, nlohmann::json{{"BBOX", 0.4}, {"SEGM", "x"}}).has_value());
  EXPECT_FALSE(logged_metric_values(m, nlohmann::json{{"BBOX", 0.4}, {"SEGM", 0.3}, {"X", 1}}).has_value());
  MetricSpec plain;
  EXPECT_EQ(*logged_metric_values(plain, nlohmann::json(0.5)), std::vector<double>{0.5});
  EXPECT_FALSE(logged_metric_values(plain, nlohmann::json{{"BBOX", 0.4}}).has_value());
  EXPECT_FALSE(logged_metric_values(plain, nlohmann::json(true)).has_value());
}

TEST(MetricParts, ReachedOnlyWhenEveryPartIs) {
  const MetricSpec m = two_part_metric();
  EXPECT_TRUE(metric_values_reached(m, {0.40, 0.35}, {0.40, 0.35}));
  EXPECT_FALSE(metric_values_reached(m, {0.50, 0.34}, {0.40, 0.35}));
  EXPECT_FALSE(metric_values_reached(m, {0.39, 0.50}, {0.40, 0.35}));
  EXPECT_FALSE(metric_values_reached(m, {0.50}, {0.40, 0.35}));
}

TEST(MetricParts, LogValueAndTargets) {
  const MetricSpec m = two_part_metric();
  EXPECT_EQ(metric_log_value(m, 0.4, {0.3, 0.7}), (nlohmann::json{{"BBOX", 0.4}, {"SEGM", 0.3}}));
  EXPECT_EQ(metric_log_value(MetricSpec{}, 0.4, {0.3}), nlohmann::json(0.4));
  ScaleSpec s;
  s.target = 0.4;
  s.more_targets = {0.35};
  EXPECT_EQ(scale_targets(s), (std::vector<double>{0.4, 0.35}));
  EXPECT_EQ(scale_targets(s, 0.1), (std::vector<double>{0.1, 0.1}));
  // The maskrcnn entry declares both parts and a target for each.
  const BenchmarkSpec* b = find_benchmark_spec("maskrcnn");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->metric.parts, (std::vector<std::string>{"BBOX", "SEGM"}));
  for (const ScaleSpec& sc : b->scales) EXPECT_EQ(scale_targets(sc).size(), 2u) << sc.name;
}

}  // namespace
}  // namespace mlpd
