// Time to train against the global batch at N ranks, and the batch to choose:
//
//   time(B) = epochs(B) · ceil(train_samples / B) · step(B) + evaluations(B) · eval
//
// evaluations = ceil(epochs / eval_every_epochs); eval = one evaluation of eval_samples dealt over
// the ranks (step_model.h: eval_seconds; 0 where the profile has no evaluation figure).
// epochs from convergence.h, step from step_model.h. Each row says what bounds its step:
//   compute    compute + skew is the largest part of the step
//   bandwidth  the exposed allreduce is, and its β (bytes) part is the larger
//   latency    the exposed allreduce is, and its α (messages) part is the larger
//   overhead   other_s (optimizer, loss allreduce) is
// and whether the batch is past the critical batch (B > B_crit, i.e. E(B) > 2·E_min: from there on
// a larger batch buys fewer steps only by paying almost as many more epochs).
// The choice is the row of least time; `why` says in a sentence or two what the neighbours lose.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mlperf/benchmark_spec.h"
#include "scaling/convergence.h"
#include "scaling/network.h"
#include "scaling/step_model.h"

namespace mlpd::scaling {

struct PlanInputs {
  std::string benchmark;
  std::string scale;
  int64_t train_samples = 0;  // samples per epoch
  int64_t eval_samples = 0;   // samples per evaluation (0: evaluation not counted)
  ConvergenceModel convergence;
  ScalingProfile profile;
  Network network;
  int ranks = 1;
  int ranks_per_node = 1;
  std::vector<int64_t> batches;  // candidates, each a positive multiple of ranks
};

enum class Bound { compute, bandwidth, latency, overhead };
const char* bound_name(Bound b);

struct PlanRow {
  int64_t global_batch = 0;
  EpochsEstimate epochs;
  int64_t steps_per_epoch = 0;
  double steps = 0.0;  // epochs · steps per epoch
  StepPrediction step;
  double evals = 0.0;   // evaluations in the run
  double eval_s = 0.0;  // their time, all together
  double time_s = 0.0;  // training steps + evaluations
  Bound bound = Bound::compute;
  bool past_critical = false;
};

struct Plan {
  PlanInputs inputs;
  std::vector<PlanRow> rows;  // ascending in batch
  size_t best = 0;            // index of the least time
  std::string why;            // the choice and its reason, a sentence or two
};

// UserError (exit 2): no candidate, a candidate not a positive multiple of the ranks, ranks < 1,
// train_samples < 1.
Plan make_plan(const PlanInputs& in);

// Candidates: ranks · 2^k per rank up to max_per_rank_batch, plus every RCP batch that is a multiple
// of the ranks with a per-rank batch up to that bound; kept to the RCPs' batch range when at least
// one candidate falls inside it (one RCP point: no range, every power of two).
std::vector<int64_t> default_batches(const ConvergenceModel& m, int ranks, int max_per_rank_batch);

// What the benchmark's rules table says at this global batch and rank count: the optimizer of the
// scale's defaults, the rows whose condition names the global batch (applies or not), and any row the
// defaults at this batch would break (a per-rank-batch constraint). One line each.
std::vector<std::string> batch_rule_notes(const BenchmarkSpec& spec, const std::string& scale, int64_t global_batch,
                                          int ranks);

// The table (aligned text, the chosen row marked '*', rows past the critical batch '!').
std::string format_plan_table(const Plan& p);
nlohmann::json plan_to_json(const Plan& p);

}  // namespace mlpd::scaling
