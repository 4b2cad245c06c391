#include "scaling/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/check.h"

namespace mlpd::scaling {
namespace {

constexpr double kAlpha = 5e-6;      // 5 us per message
constexpr double kBeta = 1.0 / 5e9;  // 5 GB/s

// Samples of `algo` on one link at several rank counts (nodes of 4 ranks) and 4 KiB..256 MiB, each
// time multiplied by (1 + u), u uniform in [-noise, noise].
std::vector<CommSample> synthetic(AllreduceAlgo algo, double noise, unsigned seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-noise, noise);
  const Link l{kAlpha, kBeta};
  std::vector<CommSample> s;
  for (int p : {2, 3, 4, 8, 16, 64})
    for (double n = 4096; n <= 256.0 * 1024 * 1024; n *= 2) {
      const double t = allreduce_seconds(algo, l, l, p, 4, n);
      s.push_back({p, 4, n, t * (1.0 + (noise > 0 ? u(rng) : 0.0))});
    }
  return s;
}

TEST(CostModel, formulas_match_hand_computed_values) {
  const Link l{1.0, 0.001};
  // ring, p = 4, n = 1000: 2*3*1 + 2*3/4*1000*0.001 = 6 + 1.5
  EXPECT_DOUBLE_EQ(allreduce_seconds(AllreduceAlgo::ring, l, l, 4, 4, 1000), 7.5);
  // tree, p = 5: 2*ceil(log2 5) = 6 messages + 2*n*beta = 2
  EXPECT_DOUBLE_EQ(allreduce_seconds(AllreduceAlgo::tree, l, l, 5, 8, 1000), 8.0);
  // allgather, p = 4: 3 + 3*1000*0.001
  EXPECT_DOUBLE_EQ(allreduce_seconds(AllreduceAlgo::allgather, l, l, 4, 4, 1000), 6.0);
  // One rank: nothing to reduce.
  EXPECT_EQ(allreduce_seconds(AllreduceAlgo::ring, l, l, 1, 1, 1000), 0.0);
}

TEST(CostModel, hierarchical_reduces_to_ring_at_the_edges_and_uses_both_links) {
  const Link intra{1e-6, 1e-11}, inter{1e-5, 1e-9};
  const double n = 1e6;
  // All ranks in one node: the intra ring only.
  EXPECT_DOUBLE_EQ(allreduce_seconds(AllreduceAlgo::hierarchical, intra, inter, 8, 8, n),
                   allreduce_seconds(AllreduceAlgo::ring, intra, intra, 8, 8, n));
  // One rank per node: the ring over nodes on the inter link with all n bytes.
  EXPECT_DOUBLE_EQ(allreduce_seconds(AllreduceAlgo::hierarchical, intra, inter, 16, 1, n),
                   allreduce_seconds(AllreduceAlgo::ring, inter, inter, 16, 1, n));
  // 4 nodes x 8: 2*7 a_intra + 2*7/8 n b_intra + 2*3 a_inter + 2*3/4 (n/8) b_inter.
  const AllreduceCost c = allreduce_cost(AllreduceAlgo::hierarchical, intra, inter, 32, 8, n);
  EXPECT_NEAR(c.alpha_part_s, 14 * 1e-6 + 6 * 1e-5, 1e-15);
  EXPECT_NEAR(c.beta_part_s, 1.75 * n * 1e-11 + 1.5 * (n / 8) * 1e-9, 1e-15);
  // A flat ring across nodes pays the inter link for the whole collective.
  EXPECT_DOUBLE_EQ(allreduce_seconds(AllreduceAlgo::ring, intra, inter, 32, 8, n),
                   allreduce_seconds(AllreduceAlgo::ring, inter, inter, 32, 32, n));
}

TEST(CostModel, fit_recovers_alpha_beta_exactly_for_every_algorithm) {
  for (AllreduceAlgo a :
       {AllreduceAlgo::ring, AllreduceAlgo::tree, AllreduceAlgo::allgather, AllreduceAlgo::hierarchical}) {
    SCOPED_TRACE(algo_name(a));
    const LinkFit f = fit_alpha_beta(a, synthetic(a, 0.0));
    EXPECT_NEAR(f.link.alpha_s / kAlpha, 1.0, 1e-6);
    EXPECT_NEAR(f.link.beta_s_per_byte / kBeta, 1.0, 1e-6);
    EXPECT_LT(f.rms_rel_error, 1e-9);
    EXPECT_FALSE(f.alpha_clamped || f.beta_clamped);
  }
}

TEST(CostModel, fit_with_5_percent_noise_is_close_and_the_wrong_formula_is_visibly_worse) {
  const std::vector<CommSample> s = synthetic(AllreduceAlgo::ring, 0.05, 7);
  const LinkFit ring = fit_alpha_beta(AllreduceAlgo::ring, s);
  EXPECT_NEAR(ring.link.alpha_s / kAlpha, 1.0, 0.05);
  EXPECT_NEAR(ring.link.beta_s_per_byte / kBeta, 1.0, 0.05);
  EXPECT_LT(ring.rms_rel_error, 0.05);
  // Control: the allgather formula cannot explain ring data across rank counts.
  const LinkFit wrong = fit_alpha_beta(AllreduceAlgo::allgather, s);
  EXPECT_GT(wrong.rms_rel_error, 5 * ring.rms_rel_error);
  EXPECT_GT(wrong.rms_rel_error, 0.2);
}

TEST(CostModel, negative_alpha_is_refitted_at_zero) {
  // Times slightly below the pure-bandwidth line: the unconstrained alpha is negative.
  std::vector<CommSample> s;
  for (int p : {2, 4, 8})
    for (double n = 1 << 20; n <= (1 << 26); n *= 2)
      s.push_back({p, p, n, 2.0 * (p - 1) / p * n * kBeta - 2.0 * (p - 1) * 1e-6});
  const LinkFit f = fit_alpha_beta(AllreduceAlgo::ring, s);
  EXPECT_TRUE(f.alpha_clamped);
  EXPECT_FALSE(f.beta_clamped);
  EXPECT_EQ(f.link.alpha_s, 0.0);
  EXPECT_NEAR(f.link.beta_s_per_byte / kBeta, 1.0, 0.02);
  // And it is the best beta-only fit: a small change of beta does not lower the squared error.
  auto sse = [&](double beta) {
    double e = 0;
    for (const CommSample& c : s) {
      const double r =
          (allreduce_seconds(AllreduceAlgo::ring, {0, beta}, {0, beta}, c.ranks, c.ranks_per_node, c.bytes) -
           c.seconds) /
          c.seconds;
      e += r * r;
    }
    return e;
  };
  const double b = f.link.beta_s_per_byte;
  EXPECT_LE(sse(b), sse(b * 1.001));
  EXPECT_LE(sse(b), sse(b * 0.999));
}

TEST(CostModel, one_rank_samples_are_ignored) {
  std::vector<CommSample> s = synthetic(AllreduceAlgo::ring, 0.0);
  const LinkFit clean = fit_alpha_beta(AllreduceAlgo::ring, s);
  s.insert(s.begin(), {1, 1, 1e6, 1.0});  // a wild time at 1 rank
  s.push_back({1, 1, 4096, 0.0});
  const LinkFit f = fit_alpha_beta(AllreduceAlgo::ring, s);
  EXPECT_DOUBLE_EQ(f.link.alpha_s, clean.link.alpha_s);
  EXPECT_DOUBLE_EQ(f.link.beta_s_per_byte, clean.link.beta_s_per_byte);
  EXPECT_EQ(f.samples_used, clean.samples_used);
  ASSERT_EQ(f.rel_error.size(), s.size());
  EXPECT_TRUE(std::isnan(f.rel_error.front()));
  EXPECT_TRUE(std::isnan(f.rel_error.back()));
  // Only 1-rank samples: nothing to fit.
  EXPECT_THROW(fit_alpha_beta(AllreduceAlgo::ring, {{1, 1, 1e6, 1.0}}), UserError);
}

TEST(CostModel, fastest_algo_picks_tree_for_latency_and_a_ring_for_bandwidth) {
  const Link slow_msgs{1e-3, 1e-12}, fat{1e-9, 1e-9};
  EXPECT_EQ(fastest_algo(slow_msgs, slow_msgs, 256, 256, 1e3), AllreduceAlgo::tree);
  const AllreduceAlgo big = fastest_algo(fat, fat, 256, 256, 1e8);
  EXPECT_TRUE(big == AllreduceAlgo::ring || big == AllreduceAlgo::hierarchical);
}

}  // namespace
}  // namespace mlpd::scaling
