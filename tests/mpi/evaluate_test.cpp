// The one evaluation path at 1..4 ranks: sums are reduced and finished on every rank; records
// are gathered to rank 0 (every rank's, in rank order, intact), finished there, and the outcome
// broadcast so every rank sees the same metric.
#include <gtest/gtest.h>

#include <boost/serialization/vector.hpp>

#include "core/serialize.h"
#include "test_world.h"
#include "train/evaluate.h"

using namespace mlpd;

namespace {

// A workload that only evaluates: rank r scores samples r*10 .. r*10+r (r+1 of them).
struct EvalOnly final : Workload {
  int rank = 0;
  int finished_on = 0;  // how many times finish_evaluation ran on this rank
  void init_parameters(uint64_t) override {}
  StepStats train_step(int, int64_t, GradReady) override { return {}; }
  EvalPartial evaluate() override {
    std::vector<int64_t> ids;
    for (int i = 0; i <= rank; ++i) ids.push_back(rank * 10 + i);
    return {{1.0 * (rank + 1), 2.0 * (rank + 1), 0.5}, to_bytes(ids)};
  }
  EvalOutcome finish_evaluation(const EvalCombined& c) override {
    ++finished_on;
    if (facts.eval_kind == EvalKind::Sums) return {c.sums.at(0) / c.sums.at(1), {c.sums.at(2)}, c.sums.at(1)};
    double n = 0, sum = 0;
    for (size_t r = 0; r < c.records_by_rank.size(); ++r)
      for (int64_t id : from_bytes<std::vector<int64_t>>(c.records_by_rank[r])) {
        EXPECT_EQ(id / 10, static_cast<int64_t>(r)) << "records out of rank order";
        sum += static_cast<double>(id);
        n += 1;
      }
    return {sum, {n * 2}, n};
  }
};

}  // namespace

TEST(Evaluate, SumsAreReducedAndFinishedOnEveryRank) {
  World& w = test_world();
  EvalOnly wl;
  wl.rank = w.rank;
  const EvalOutcome o = evaluate_everywhere(w, wl, 1);
  EXPECT_EQ(wl.finished_on, 1);
  EXPECT_DOUBLE_EQ(o.metric, 0.5);  // sum(r+1) / sum(2(r+1))
  EXPECT_DOUBLE_EQ(o.secondary.at(0), 0.5 * w.size);
  EXPECT_DOUBLE_EQ(o.samples, w.size * (w.size + 1.0));
}

TEST(Evaluate, RecordsAreGatheredToRankZeroAndTheOutcomeBroadcast) {
  World& w = test_world();
  EvalOnly wl;
  wl.rank = w.rank;
  wl.facts.eval_kind = EvalKind::Records;
  const EvalOutcome o = evaluate_everywhere(w, wl, 1);
  EXPECT_EQ(wl.finished_on, w.rank == 0 ? 1 : 0);
  double want_sum = 0, want_n = 0;
  for (int r = 0; r < w.size; ++r)
    for (int i = 0; i <= r; ++i) want_sum += r * 10 + i, want_n += 1;
  EXPECT_DOUBLE_EQ(o.metric, want_sum);  // the same on every rank
  EXPECT_DOUBLE_EQ(o.samples, want_n);
  EXPECT_DOUBLE_EQ(o.secondary.at(0), 2 * want_n);
}
