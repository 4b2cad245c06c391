#include "scaling/plan.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/check.h"
#include "scaling/device.h"
#include "workloads/registry.h"

namespace mlpd::scaling {
namespace {

// Epochs E(B) = 10 (1 + B / 8192) at 512..65536: every candidate below is inside the points.
ConvergenceModel synthetic_convergence() {
  std::vector<RcpPoint> pts;
  for (int64_t b = 512; b <= 65536; b *= 2) pts.push_back({b, {10.0 * (1.0 + b / 8192.0)}, "synthetic"});
  return make_convergence(pts);
}

PlanInputs synthetic_inputs(const Link& net) {
  PlanInputs in;
  in.benchmark = "synthetic";
  in.scale = "test";
  in.train_samples = 1000000;
  in.convergence = synthetic_convergence();
  in.profile.seconds_per_sample = 1e-4;
  in.profile.grad_bytes = 1e8;
  in.profile.algo = AllreduceAlgo::ring;
  in.network = measured_network(net, 8, "test");
  in.ranks = 64;
  in.ranks_per_node = 8;
  for (int64_t b = 512; b <= 65536; b *= 2) in.batches.push_back(b);
  return in;
}

size_t argmin_time(const Plan& p) {
  size_t k = 0;
  for (size_t i = 0; i < p.rows.size(); ++i)
    if (p.rows[i].time_s < p.rows[k].time_s) k = i;
  return k;
}

TEST(Plan, free_communication_and_growing_epochs_choose_the_smallest_batch) {
  const Plan p = make_plan(synthetic_inputs({0, 0}));
  ASSERT_EQ(p.rows.size(), 8u);
  EXPECT_EQ(p.best, argmin_time(p));
  EXPECT_EQ(p.rows[p.best].global_batch, 512);
  for (const PlanRow& r : p.rows) EXPECT_EQ(r.bound, Bound::compute);
  EXPECT_NE(p.why.find("smallest candidate"), std::string::npos) << p.why;
}

TEST(Plan, a_latency_bound_network_pushes_to_a_larger_batch_and_epochs_push_back) {
  // Ring over 64 ranks at 1 ms per message: 126 ms of allreduce per step, whatever the batch.
  // time(B) ~ E(B) (S/B)(1e-4 B/64 + 0.126) is least near B = sqrt(0.126·8192·64/1e-4) ~ 25700: of
  // the candidates, 32768 (16384 and 65536 lose on steps and on epochs respectively).
  const Plan p = make_plan(synthetic_inputs({1e-3, 0}));
  EXPECT_EQ(p.best, argmin_time(p));
  EXPECT_EQ(p.rows[p.best].global_batch, 32768);
  EXPECT_EQ(p.rows.front().bound, Bound::latency);
  EXPECT_TRUE(p.rows.back().past_critical);
  EXPECT_FALSE(p.rows.front().past_critical);
  EXPECT_NE(p.why.find("32768"), std::string::npos);
  EXPECT_NE(p.why.find("more epochs"), std::string::npos) << p.why;
  EXPECT_NE(p.why.find("per-step costs"), std::string::npos) << p.why;
}

TEST(Plan, a_slow_link_is_bandwidth_bound) {
  const Plan p = make_plan(synthetic_inputs({0, 1e-9}));  // 1 GB/s, 100 MB of gradients
  EXPECT_EQ(p.rows.front().bound, Bound::bandwidth);
  EXPECT_EQ(p.best, argmin_time(p));
  EXPECT_GT(p.rows[p.best].global_batch, 512);
}

TEST(Plan, constant_epochs_and_a_per_step_cost_choose_the_largest_batch) {
  PlanInputs in = synthetic_inputs({1e-6, 1e-11});
  in.convergence = make_convergence({{4096, {5.0}, "one point"}});
  in.train_samples = 1 << 20;  // every candidate divides the epoch: no partial last step favours one
  const Plan p = make_plan(in);
  EXPECT_EQ(p.best, p.rows.size() - 1);
  EXPECT_EQ(p.rows[p.best].epochs.kind, EpochsKind::constant);
  EXPECT_NE(p.why.find("largest candidate"), std::string::npos) << p.why;
  EXPECT_NE(p.why.find("one convergence point"), std::string::npos) << p.why;
}

TEST(Plan, time_is_epochs_times_steps_times_step_time) {
  const Plan p = make_plan(synthetic_inputs({1e-5, 1e-10}));
  for (const PlanRow& r : p.rows) {
    EXPECT_EQ(r.steps_per_epoch, (1000000 + r.global_batch - 1) / r.global_batch);
    EXPECT_DOUBLE_EQ(r.time_s, r.epochs.epochs * r.steps_per_epoch * r.step.total_s);
  }
  const nlohmann::json j = plan_to_json(p);
  EXPECT_EQ(j["chosen_global_batch"], p.rows[p.best].global_batch);
  EXPECT_EQ(j["rows"].size(), p.rows.size());
  EXPECT_FALSE(format_plan_table(p).empty());
}

TEST(Plan, evaluations_add_their_time_once_per_eval_period) {
  PlanInputs in = synthetic_inputs({1e-5, 1e-10});
  const Plan without = make_plan(in);
  in.eval_samples = 6400;
  in.profile.eval_s_per_sample = 1e-3;  // one evaluation at 64 ranks: 100 samples each, 0.1 s
  in.profile.eval_every_epochs = 4;
  const Plan with = make_plan(in);
  for (size_t i = 0; i < with.rows.size(); ++i) {
    const PlanRow& r = with.rows[i];
    EXPECT_DOUBLE_EQ(r.evals, std::ceil(r.epochs.epochs / 4));
    EXPECT_NEAR(r.eval_s, r.evals * 0.1, 1e-12);
    EXPECT_NEAR(r.time_s, without.rows[i].time_s + r.eval_s, 1e-9);
  }
}

TEST(Plan, bad_candidates_are_usage_errors) {
  PlanInputs in = synthetic_inputs({0, 0});
  in.batches = {1000};  // not a multiple of 64
  EXPECT_THROW(make_plan(in), UserError);
  in.batches = {};
  EXPECT_THROW(make_plan(in), UserError);
  in.batches = {64};
  in.ranks = 0;
  EXPECT_THROW(make_plan(in), UserError);
}

TEST(Plan, default_batches_for_resnet_reference_at_256_ranks) {
  const ConvergenceModel m = make_convergence(find_scale(find_workload("resnet").spec, "reference").rcps);
  // Powers of two per rank inside the RCPs (1632..65536), plus the RCP batch 13056 = 256 x 51.
  EXPECT_EQ(default_batches(m, 256, 256), (std::vector<int64_t>{2048, 4096, 8192, 13056, 16384, 32768, 65536}));
  // One point: no range, every power of two per rank.
  const ConvergenceModel one = make_convergence({{128, {4.0}, "x"}});
  EXPECT_EQ(default_batches(one, 2, 8), (std::vector<int64_t>{2, 4, 8, 16}));
  EXPECT_EQ(default_batches(one, 3, 64), (std::vector<int64_t>{3, 6, 12, 24, 48, 96, 192}));
}

TEST(Plan, resnet_reference_on_200g_chooses_a_batch_between_the_extremes) {
  const BenchmarkSpec& spec = find_workload("resnet").spec;
  const ScaleSpec& sc = find_scale(spec, "reference");
  PlanInputs in;
  in.benchmark = "resnet";
  in.scale = "reference";
  in.train_samples = sc.train_samples;
  in.convergence = make_convergence(sc.rcps);
  in.profile = device_profile(find_device_figure("resnet", "a100"), 4, AllreduceAlgo::hierarchical);
  in.network = make_network(find_inter_preset("200g"), find_intra_preset("nvlink3"), 8);
  in.ranks = 256;
  in.ranks_per_node = 8;
  in.batches = default_batches(in.convergence, 256, 256);
  const Plan p = make_plan(in);
  EXPECT_EQ(p.best, argmin_time(p));
  EXPECT_GT(p.best, 0u);                 // per-step costs push up from 2048
  EXPECT_LT(p.best, p.rows.size() - 1);  // epochs push back from 65536
}

TEST(Plan, rule_notes_follow_the_batch) {
  const BenchmarkSpec& spec = find_workload("resnet").spec;
  auto has = [](const std::vector<std::string>& v, const std::string& s) {
    for (const std::string& x : v)
      if (x.find(s) != std::string::npos) return true;
    return false;
  };
  const std::vector<std::string> small = batch_rule_notes(spec, "reference", 8192, 256);
  EXPECT_TRUE(has(small, "optimizer (the scale's defaults): lars"));
  EXPECT_TRUE(has(small, "resnet.lars_momentum_0.9_below_32k_batch: applies"));
  const std::vector<std::string> big = batch_rule_notes(spec, "reference", 65536, 256);
  EXPECT_TRUE(has(big, "resnet.lars_momentum_0.9_below_32k_batch: does not apply"));
}

}  // namespace
}  // namespace mlpd::scaling
