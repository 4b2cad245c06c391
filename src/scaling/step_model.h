// One training step at N ranks: compute + exposed communication + skew + other, fitted from the
// steps `mlperf-dist scale` measures at a few rank counts and predicted at any other.
//
// Model (per step, seconds; b = global_batch / ranks, the per-rank batch):
//   compute    = (fixed_compute_s + seconds_per_sample · b) · contention
//   contention = max(1, ranks_per_node · threads_per_rank / cores_per_node)   (cores_per_node 0: 1)
//                ranks sharing a host's cores run that much slower (2 cores, 4 ranks: x2)
//   comm       = (1 − overlap_fraction) · allreduce_seconds(algo, ranks, grad_bytes) · contention
//                (cost_model.h; on a host the collective's copies and sums run on the shared cores)
//   skew       = compute · compute_cv · E[max of N standard normals]
//                the wait for the slowest rank: mean over ranks of (max_r compute − own compute)
//   other      = other_s · contention (optimizer + loss allreduce: compute on the same shared cores)
//   step       = compute + comm + skew + other
// Efficiency: throughput / (N · the 1-rank throughput at the same per-rank batch), i.e. against
// perfect weak scaling; contention, communication and skew are what it loses.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "scaling/cost_model.h"
#include "scaling/network.h"

namespace mlpd::scaling {

// A measured point from `scale`.
// clang-format off
struct MeasuredStep {        // means over the measured steps, seconds
  int ranks = 1; int ranks_per_node = 1;
  int64_t global_batch = 0;  // samples (work units) per step, all ranks
  double step_s = 0, compute_s = 0, comm_s = 0, skew_s = 0, other_s = 0;  // step = compute + comm + skew + other
  double compute_cv = 0;     // coefficient of variation of one rank's compute time over steps
  double comm_busy_s = 0;    // per step: span of all gradient allreduces (submit→complete), incl. hidden part
  double eval_s = 0;         // one evaluation, whole (0: none measured)
  int64_t eval_samples = 0;  // samples one evaluation covers, all ranks
  int eval_every_epochs = 1;
  int64_t steps_per_epoch = 0;  // at this global batch (0: unknown)
};
// clang-format on

struct ScalingProfile {
  double seconds_per_sample = 0.0;  // compute per sample on one rank without contention
  double fixed_compute_s = 0.0;     // compute per step independent of the batch (launches, fixed costs)
  double other_s = 0.0;             // optimizer + loss allreduce per step
  double grad_bytes = 0.0;          // bytes allreduced per step per rank (on the wire)
  double overlap_fraction = 0.0;    // share of the allreduce time hidden behind backward, [0, 1]
  double compute_cv = 0.0;          // coefficient of variation of one rank's compute over steps
  int cores_per_node = 0;           // 0: ranks do not share cores (one GPU each)
  int threads_per_rank = 1;
  AllreduceAlgo algo = AllreduceAlgo::ring;
  double eval_s_per_sample = 0.0;   // one evaluation's time per eval sample on one rank, no contention (0: unknown)
  int eval_every_epochs = 1;
  double epoch_work = 0.0;          // an epoch in the global batch's unit (steps per epoch · batch; 0: unknown).
                                    // ncf counts negatives in its batch: 5 units per training positive
  Link intra;                 // fitted from comm samples (measured network), else 0
  double comm_fit_rms = 0.0;  // RMS relative error of that fit (0: not fitted)
  bool has_inter = false;     // samples across nodes were fitted apart: inter (else intra serves both)
  Link inter;
  double inter_fit_rms = 0.0;
  std::string source;         // where the figures come from
};

// Expected maximum of n independent standard normals (n >= 1; 1 gives 0), by numerical integration
// of x·n·φ(x)·Φ(x)^(n−1) (exact to ~1e-9, any n).
double expected_max_normal(int n);
// Compute slowdown of ranks sharing cores: max(1, ranks_per_node · threads / cores); 1 when cores <= 0.
double contention_factor(const ScalingProfile& p, int ranks_per_node);

// One evaluation of `eval_samples` samples dealt over the ranks (0 when the profile has no figure).
double eval_seconds(const ScalingProfile& p, int ranks, int ranks_per_node, int64_t eval_samples);

// Fits a profile to measured points:
//   - compute constants from the points at the SMALLEST rank count only (the other points stay
//     out-of-sample): with >= 2 distinct per-rank batches there, least squares of compute (divided
//     by its contention factor) on the per-rank batch; else fixed = 0 and per_sample = compute / b.
//   - other_s (contention divided out), compute_cv: means over the points at the smallest rank count.
//   - eval_s_per_sample: there too, eval_s · ranks / eval_samples, contention divided out.
//   - epoch_work: steps_per_epoch · global_batch of the first point that has it.
//   - overlap: mean over points with ranks > 1 and comm_busy_s > 0 of 1 − comm_s / comm_busy_s,
//     clipped to [0, 1]; 0 when there is none.
//   - links: fit_alpha_beta(algo, ...) of the samples within one node (intra) and of those across
//     nodes (inter, has_inter) when both kinds exist, else of all of them (intra); each sample's
//     time divided by its contention factor first. No sample at > 1 rank: 0.
// UserError (exit 2) when there is no usable point (global_batch > 0, compute_s > 0).
ScalingProfile fit_profile(const std::vector<MeasuredStep>& points, const std::vector<CommSample>& comm,
                           double grad_bytes, int cores_per_node, AllreduceAlgo algo, int threads_per_rank = 1);

struct StepPrediction {
  int ranks = 1;
  int ranks_per_node = 1;
  int64_t global_batch = 0;
  double per_rank_batch = 0.0;
  double contention = 1.0;
  AllreduceCost allreduce;  // one full allreduce of the gradients (before overlap)
  double compute_s = 0.0, comm_s = 0.0, skew_s = 0.0, other_s = 0.0, total_s = 0.0;
  double throughput = 0.0;  // samples / s
  double efficiency = 1.0;  // throughput / (ranks · 1-rank throughput at the same per-rank batch)
};

// ranks >= 1, ranks_per_node >= 1 (clamped to ranks), global_batch >= ranks. The allreduce runs on
// network.intra / network.inter with profile.algo.
StepPrediction predict_step(const ScalingProfile& profile, const Network& network, int ranks, int ranks_per_node,
                            int64_t global_batch);

struct PointError {
  MeasuredStep measured;
  StepPrediction predicted;
  double rel_error = 0.0;  // (predicted − measured) / measured step time
  bool in_sample = false;  // the point was at the smallest rank count (its compute was fitted on it)
};
// Each measured point predicted at its own ranks, ranks per node and batch.
std::vector<PointError> prediction_errors(const ScalingProfile& profile, const Network& network,
                                          const std::vector<MeasuredStep>& points);

}  // namespace mlpd::scaling
