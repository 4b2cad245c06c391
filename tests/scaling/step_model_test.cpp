#include "scaling/step_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/check.h"

namespace mlpd::scaling {
namespace {

TEST(StepModel, expected_max_of_normals_matches_tables) {
  // E[max of N standard normals] (Tippett 1925; Harter 1961 tables).
  EXPECT_EQ(expected_max_normal(1), 0.0);
  EXPECT_NEAR(expected_max_normal(2), 0.5642, 0.02 * 0.5642);
  EXPECT_NEAR(expected_max_normal(4), 1.0294, 0.02 * 1.0294);
  EXPECT_NEAR(expected_max_normal(10), 1.5388, 0.02 * 1.5388);
  // 1/sqrt(pi) exactly for two.
  EXPECT_NEAR(expected_max_normal(2), 1.0 / std::sqrt(M_PI), 1e-7);
  // Grows like sqrt(2 ln N), slowly: at 1024 about 3.2.
  EXPECT_NEAR(expected_max_normal(1024), 3.20, 0.05);
}

// The truth the synthetic points are generated from: a host of 2 cores, the allgather backend.
ScalingProfile truth() {
  ScalingProfile p;
  p.seconds_per_sample = 1e-3;
  p.fixed_compute_s = 2e-3;
  p.other_s = 1.5e-3;
  p.grad_bytes = 4e6;
  p.overlap_fraction = 0.3;
  p.compute_cv = 0.05;
  p.cores_per_node = 2;
  p.threads_per_rank = 1;
  p.algo = AllreduceAlgo::allgather;
  p.intra = {20e-6, 1.0 / 2e9};
  return p;
}

MeasuredStep measure(const ScalingProfile& t, int ranks, int64_t global_batch) {
  const Network host = measured_network(t.intra, ranks, "truth");
  const StepPrediction s = predict_step(t, host, ranks, ranks, global_batch);
  MeasuredStep m;
  m.ranks = ranks;
  m.ranks_per_node = ranks;
  m.global_batch = global_batch;
  m.compute_s = s.compute_s;
  m.comm_s = s.comm_s;
  m.skew_s = s.skew_s;
  m.other_s = s.other_s;
  m.step_s = s.total_s;
  m.compute_cv = t.compute_cv;
  m.comm_busy_s = s.allreduce.total_s();
  return m;
}

TEST(StepModel, fit_profile_recovers_a_known_profile_and_predicts_its_points_exactly) {
  const ScalingProfile t = truth();
  // 1 rank at two batches (the fit), then 2 and 4 ranks (weak scaling: out of sample).
  const std::vector<MeasuredStep> pts = {measure(t, 1, 32), measure(t, 1, 64), measure(t, 2, 64), measure(t, 4, 128),
                                         measure(t, 4, 256)};
  std::vector<CommSample> comm;
  for (int p : {2, 4})
    for (double n = 4096; n <= 64e6; n *= 4)
      // measured on the 2-core host: 4 ranks share the cores, so the collective takes twice as long
      comm.push_back({p, p, n, allreduce_seconds(t.algo, t.intra, t.intra, p, p, n) * (p > 2 ? p / 2.0 : 1.0)});
  const ScalingProfile f = fit_profile(pts, comm, t.grad_bytes, 2, AllreduceAlgo::allgather);
  EXPECT_NEAR(f.seconds_per_sample, t.seconds_per_sample, 1e-12);
  EXPECT_NEAR(f.fixed_compute_s, t.fixed_compute_s, 1e-12);
  EXPECT_NEAR(f.other_s, t.other_s, 1e-15);
  EXPECT_NEAR(f.overlap_fraction, t.overlap_fraction, 1e-12);
  EXPECT_NEAR(f.compute_cv, t.compute_cv, 1e-15);
  EXPECT_NEAR(f.intra.alpha_s / t.intra.alpha_s, 1.0, 1e-6);
  EXPECT_NEAR(f.intra.beta_s_per_byte / t.intra.beta_s_per_byte, 1.0, 1e-6);

  const Network host = measured_network(f.intra, 2, "fit");
  const std::vector<PointError> e = prediction_errors(f, host, pts);
  ASSERT_EQ(e.size(), pts.size());
  for (const PointError& pe : e) {
    EXPECT_NEAR(pe.rel_error, 0.0, 1e-6) << pe.measured.ranks << " ranks, batch " << pe.measured.global_batch;
    EXPECT_EQ(pe.in_sample, pe.measured.ranks == 1);
  }
}

TEST(StepModel, single_batch_at_the_smallest_rank_count_has_no_fixed_compute) {
  ScalingProfile t = truth();
  t.fixed_compute_s = 0.0;
  const ScalingProfile f =
      fit_profile({measure(t, 1, 50), measure(t, 2, 100)}, {}, t.grad_bytes, 2, AllreduceAlgo::allgather);
  EXPECT_EQ(f.fixed_compute_s, 0.0);
  EXPECT_NEAR(f.seconds_per_sample, 1e-3, 1e-15);
  EXPECT_EQ(f.intra.alpha_s, 0.0);  // no comm samples: no link
  EXPECT_THROW(fit_profile({}, {}, 1, 2, AllreduceAlgo::ring), UserError);
}

TEST(StepModel, samples_across_nodes_fit_the_inter_link_apart) {
  ScalingProfile t = truth();
  t.cores_per_node = 0;  // no contention: the samples are the formulas' own
  const Link intra = {2e-6, 1.0 / 10e9}, inter = {40e-6, 1.0 / 1e9};
  std::vector<CommSample> comm;
  for (double n = 65536; n <= 16e6; n *= 4) {
    comm.push_back({2, 2, n, allreduce_seconds(AllreduceAlgo::ring, intra, inter, 2, 2, n)});
    comm.push_back({4, 2, n, allreduce_seconds(AllreduceAlgo::ring, intra, inter, 4, 2, n)});  // 2 nodes
  }
  const ScalingProfile f = fit_profile({measure(t, 1, 64)}, comm, t.grad_bytes, 0, AllreduceAlgo::ring);
  ASSERT_TRUE(f.has_inter);
  EXPECT_NEAR(f.intra.alpha_s / intra.alpha_s, 1.0, 1e-6);
  EXPECT_NEAR(f.intra.beta_s_per_byte / intra.beta_s_per_byte, 1.0, 1e-6);
  EXPECT_NEAR(f.inter.alpha_s / inter.alpha_s, 1.0, 1e-6);
  EXPECT_NEAR(f.inter.beta_s_per_byte / inter.beta_s_per_byte, 1.0, 1e-6);
  // One kind of sample only: one link, no inter.
  comm.resize(1);
  EXPECT_FALSE(fit_profile({measure(t, 1, 64)}, comm, t.grad_bytes, 0, AllreduceAlgo::ring).has_inter);
}

TEST(StepModel, evaluation_and_epoch_size_are_fitted_at_the_smallest_rank_count) {
  const ScalingProfile t = truth();
  MeasuredStep one = measure(t, 1, 64), four = measure(t, 4, 256);
  one.eval_s = 2.0;  // 1000 samples on one rank
  one.eval_samples = 1000;
  one.eval_every_epochs = 2;
  one.steps_per_epoch = 50;
  four.eval_s = 99.0;  // not the fitted count: ignored
  four.eval_samples = 1000;
  const ScalingProfile f = fit_profile({one, four}, {}, t.grad_bytes, 2, AllreduceAlgo::allgather);
  EXPECT_NEAR(f.eval_s_per_sample, 2e-3, 1e-15);
  EXPECT_EQ(f.eval_every_epochs, 2);
  EXPECT_DOUBLE_EQ(f.epoch_work, 50.0 * 64);
  // Dealt over 4 ranks on 2 cores: a quarter of the samples each, at half speed.
  EXPECT_NEAR(eval_seconds(f, 4, 4, 1000), 2e-3 * 250 * 2, 1e-12);
  EXPECT_NEAR(eval_seconds(f, 2, 2, 1001), 2e-3 * 501, 1e-12);
  EXPECT_EQ(eval_seconds(t, 2, 2, 1000), 0.0);  // no figure: not counted
}

TEST(StepModel, four_ranks_on_two_cores_double_the_compute_and_the_update) {
  ScalingProfile p = truth();
  const Network host = measured_network(p.intra, 4, "test");
  const StepPrediction one = predict_step(p, host, 1, 1, 64);
  const StepPrediction two = predict_step(p, host, 2, 2, 128);
  const StepPrediction four = predict_step(p, host, 4, 4, 256);
  EXPECT_DOUBLE_EQ(two.compute_s,
                   one.compute_s);  // 2 ranks, 2 cores: no sharing
  EXPECT_DOUBLE_EQ(four.compute_s, 2.0 * one.compute_s);
  EXPECT_DOUBLE_EQ(four.contention, 2.0);
  EXPECT_DOUBLE_EQ(two.other_s, one.other_s);
  EXPECT_DOUBLE_EQ(four.other_s, 2.0 * one.other_s);
  // The fit divides it out: a 4-rank-only measurement gives the 1-rank per-sample time back.
  const ScalingProfile f =
      fit_profile({measure(p, 4, 256), measure(p, 4, 512)}, {}, p.grad_bytes, 2, AllreduceAlgo::allgather);
  EXPECT_NEAR(f.seconds_per_sample, p.seconds_per_sample, 1e-12);
  EXPECT_NEAR(f.other_s, p.other_s, 1e-15);
  // On GPUs (cores 0) nothing is shared.
  p.cores_per_node = 0;
  EXPECT_DOUBLE_EQ(predict_step(p, host, 4, 4, 256).compute_s, one.compute_s);
}

TEST(StepModel, efficiency_is_one_without_communication_or_skew) {
  ScalingProfile p;
  p.seconds_per_sample = 1e-3;
  p.grad_bytes = 1e6;
  const Network free_net = measured_network({0, 0}, 8, "free");
  const StepPrediction s = predict_step(p, free_net, 64, 8, 64 * 32);
  EXPECT_DOUBLE_EQ(s.efficiency, 1.0);
  EXPECT_DOUBLE_EQ(s.throughput, 64 * 32 / (32 * 1e-3));
  // Skew and communication cost efficiency.
  p.compute_cv = 0.1;
  const StepPrediction k = predict_step(p, measured_network({1e-5, 1e-9}, 8, "x"), 64, 8, 64 * 32);
  EXPECT_LT(k.efficiency, 1.0);
  EXPECT_NEAR(k.skew_s, k.compute_s * 0.1 * expected_max_normal(64), 1e-15);
}

}  // namespace
}  // namespace mlpd::scaling
