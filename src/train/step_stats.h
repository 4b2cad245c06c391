// Where each step's time went, per rank, for scaling studies (`train --step-stats FILE`, read by
// `mlperf-dist scale`): forward+backward, waiting for the gradient buckets, the update, and how
// long the buckets' allreduces ran in all. Summarised over ranks and steps into compute /
// communication / skew / other, where skew is the wait caused by the slowest rank's compute.
#pragma once
#include <string>
#include <vector>

#include "comm/world.h"

namespace mlpd {

// One rank's step, seconds.
struct StepTimes {
  double compute = 0.0;  // zero grads .. this rank's backward done (includes the data fetch)
  double wait = 0.0;     // backward done .. every bucket's sum here (exposed comm + skew)
  double other = 0.0;    // optimizer step and the loss allreduce
  double busy = 0.0;     // first bucket's submit .. last bucket's completion (0 at one rank)
  double work = 0.0;     // the step's global work (samples, tokens): the same on every rank
  double bytes = 0.0;    // gradient bytes this rank's collectives carried (buckets; sparse rows gathered)
};

// Means per step over the summarised steps and every rank. step = compute + comm + skew + other.
struct StepStatsSummary {
  int ranks = 1;
  int ranks_per_node = 1;   // the largest number of ranks sharing a node
  int64_t steps = 0;        // steps summarised (after the skipped warm-up steps)
  int64_t skipped = 0;
  double global_batch = 0.0;  // mean work per step
  double step_s = 0.0, compute_s = 0.0, comm_s = 0.0, skew_s = 0.0, other_s = 0.0;
  double compute_cv = 0.0;  // a rank's compute time over steps: sd / mean, averaged over ranks
  double comm_busy_s = 0.0;
  double comm_bytes = 0.0;  // per rank per step: what StepTimes::bytes counts
  double throughput = 0.0;  // work per second of step time
};

// Warm-up steps left out of a summary of `steps` steps: first-touch allocation and cold caches.
int64_t warmup_steps_to_skip(int64_t steps);

// `per_rank[r][s]`: rank r's step s (every rank the same number of steps). For each step, rank r's
// skew is the largest compute of that step over ranks minus its own, and its exposed
// communication is its wait minus that skew (at least 0; what remains of skew beyond the wait was
// absorbed by the update's loss allreduce and is counted there).
StepStatsSummary summarize_step_times(const std::vector<std::vector<StepTimes>>& per_rank, int ranks_per_node,
                                      int64_t skip);

// Every rank's steps to rank 0 (collective; the others get an empty vector).
std::vector<std::vector<StepTimes>> gather_step_times(const World& w, const std::vector<StepTimes>& mine);

// The summary as JSON text (one object), with the extra fields given (time to train, status).
std::string step_stats_json(const StepStatsSummary& s, const std::string& extra_fields_json);

}  // namespace mlpd
