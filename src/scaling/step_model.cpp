#include "scaling/least_squares.h"
#include "scaling/step_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"

namespace mlpd::scaling {

double expected_max_normal(int n) {
  if (n <= 1) return 0.0;
  // E[max] = ∫ x · n φ(x) Φ(x)^(n−1) dx, Simpson's rule on [-9, 9] (the density is < 1e-17 outside
  // for any n up to 1e9: the maximum concentrates near sqrt(2 ln n) < 6.5).
  const double lo = -9.0, hi = 9.0;
  const int m = 6000;  // even
  const double h = (hi - lo) / m;
  const double inv_sqrt2pi = 0.3989422804014327;
  double s = 0.0;
  for (int i = 0; i <= m; ++i) {
    const double x = lo + i * h;
    const double phi = inv_sqrt2pi * std::exp(-0.5 * x * x);
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    const double f = cdf > 0 ? x * n * phi * std::exp((n - 1) * std::log(cdf)) : 0.0;
    s += f * (i == 0 || i == m ? 1.0 : (i % 2 ? 4.0 : 2.0));
  }
  return s * h / 3.0;
}

double contention_factor(const ScalingProfile& p, int ranks_per_node) {
  if (p.cores_per_node <= 0) return 1.0;
  return std::max(1.0, static_cast<double>(ranks_per_node) * std::max(1, p.threads_per_rank) / p.cores_per_node);
}

double eval_seconds(const ScalingProfile& p, int ranks, int ranks_per_node, int64_t eval_samples) {
  if (!(p.eval_s_per_sample > 0) || eval_samples <= 0) return 0.0;
  const int64_t share = (eval_samples + ranks - 1) / std::max(1, ranks);
  return p.eval_s_per_sample * static_cast<double>(share) * contention_factor(p, ranks_per_node);
}

ScalingProfile fit_profile(const std::vector<MeasuredStep>& points, const std::vector<CommSample>& comm,
                           double grad_bytes, int cores_per_node, AllreduceAlgo algo, int threads_per_rank) {
  ScalingProfile p;
  p.grad_bytes = grad_bytes;
  p.cores_per_node = cores_per_node;
  p.threads_per_rank = threads_per_rank;
  p.algo = algo;

  std::vector<const MeasuredStep*> usable;
  for (const MeasuredStep& m : points)
    if (m.ranks >= 1 && m.global_batch > 0 && m.compute_s > 0) usable.push_back(&m);
  if (usable.empty()) throw UserError("fit_profile: no measured point with a positive batch and compute time", 2);
  int min_ranks = usable.front()->ranks;
  for (const MeasuredStep* m : usable) min_ranks = std::min(min_ranks, m->ranks);

  // Compute per step against the per-rank batch at the smallest rank count, contention divided out.
  std::vector<std::pair<double, double>> xy;  // (per-rank batch, compute without contention)
  double other = 0.0, cv = 0.0, eval = 0.0;
  int evals = 0;
  for (const MeasuredStep* m : usable) {
    if (m->ranks != min_ranks) continue;
    const double b = static_cast<double>(m->global_batch) / m->ranks;
    const double contention = contention_factor(p, std::min(m->ranks_per_node, m->ranks));
    xy.emplace_back(b, m->compute_s / contention);
    other += m->other_s / contention;
    if (p.epoch_work == 0.0 && m->steps_per_epoch > 0)
      p.epoch_work = static_cast<double>(m->steps_per_epoch) * static_cast<double>(m->global_batch);
    if (m->eval_s > 0 && m->eval_samples > 0) {
      eval += m->eval_s * m->ranks / static_cast<double>(m->eval_samples) / contention;
      ++evals;
      p.eval_every_epochs = std::max(1, m->eval_every_epochs);
    }
    cv += m->compute_cv;
  }
  p.other_s = other / xy.size();
  p.compute_cv = cv / xy.size();
  p.eval_s_per_sample = evals ? eval / evals : 0.0;
  const LineFit line = fit_line(xy);
  const bool two_batches = line.sxx > 1e-12 * line.mean_x * line.mean_x;
  if (two_batches && line.sxy > 0) {
    p.seconds_per_sample = line.slope;
    p.fixed_compute_s = line.intercept;
    if (p.fixed_compute_s < 0) {  // a negative intercept is noise: through the origin instead
      double sx2 = 0, sx_y = 0;
      for (auto [x, y] : xy) {
        sx2 += x * x;
        sx_y += x * y;
      }
      p.seconds_per_sample = sx_y / sx2;
      p.fixed_compute_s = 0.0;
    }
  } else {
    p.seconds_per_sample = line.mean_y / line.mean_x;
    p.fixed_compute_s = 0.0;
  }

  // Overlap: the hidden share of the allreduce span.
  double ov = 0.0;
  int nov = 0;
  for (const MeasuredStep* m : usable) {
    if (m->ranks <= 1 || !(m->comm_busy_s > 0)) continue;
    ov += std::clamp(1.0 - m->comm_s / m->comm_busy_s, 0.0, 1.0);
    ++nov;
  }
  p.overlap_fraction = nov ? ov / nov : 0.0;

  bool have_comm = false;
  for (const CommSample& c : comm) have_comm = have_comm || (c.ranks > 1 && c.seconds > 0);
  if (have_comm) {
    // Host collectives copy and add on the ranks' own cores: shared cores slow them alike.
    // Samples within one node fit the intra link, samples across nodes the inter link (the flat
    // formulas run on the slowest hop); without samples of one kind, the other serves for both.
    std::vector<CommSample> one_node, across;
    for (CommSample c : comm) {
      c.seconds /= contention_factor(p, std::min(c.ranks_per_node, c.ranks));
      (c.ranks_per_node >= c.ranks ? one_node : across).push_back(c);
    }
    const auto usable = [](const std::vector<CommSample>& v) {
      for (const CommSample& c : v)
        if (c.ranks > 1 && c.seconds > 0) return true;
      return false;
    };
    const bool have_intra = usable(one_node), have_inter = usable(across);
    const LinkFit fi = fit_alpha_beta(algo, have_intra ? one_node : across);
    p.intra = fi.link;
    p.comm_fit_rms = fi.rms_rel_error;
    if (have_intra && have_inter) {
      const LinkFit fx = fit_alpha_beta(algo, across);
      p.inter = fx.link;
      p.inter_fit_rms = fx.rms_rel_error;
      p.has_inter = true;
    }
  }
  p.source = "compute fitted at " + std::to_string(min_ranks) + " rank(s) (" + std::to_string(xy.size()) +
             " point(s)); link fitted (" + algo_name(algo) + ") from " + std::to_string(comm.size()) +
             " comm-bench sample(s)";
  return p;
}

namespace {

StepPrediction predict_raw(const ScalingProfile& pr, const Network& net, int ranks, int ranks_per_node,
                           double global_batch) {
  StepPrediction s;
  s.ranks = std::max(1, ranks);
  s.ranks_per_node = std::clamp(ranks_per_node, 1, s.ranks);
  s.global_batch = static_cast<int64_t>(std::llround(global_batch));
  s.per_rank_batch = global_batch / s.ranks;
  s.contention = contention_factor(pr, s.ranks_per_node);
  s.compute_s = (pr.fixed_compute_s + pr.seconds_per_sample * s.per_rank_batch) * s.contention;
  s.allreduce = allreduce_cost(pr.algo, net.intra, net.inter, s.ranks, s.ranks_per_node, pr.grad_bytes);
  s.allreduce.alpha_part_s *= s.contention;  // host collectives run on the shared cores too
  s.allreduce.beta_part_s *= s.contention;
  s.comm_s = (1.0 - std::clamp(pr.overlap_fraction, 0.0, 1.0)) * s.allreduce.total_s();
  s.skew_s = s.compute_s * pr.compute_cv * expected_max_normal(s.ranks);
  s.other_s = pr.other_s * s.contention;  // the update is compute on the same shared cores
  s.total_s = s.compute_s + s.comm_s + s.skew_s + s.other_s;
  s.throughput = s.total_s > 0 ? global_batch / s.total_s : std::numeric_limits<double>::infinity();
  return s;
}

}  // namespace

StepPrediction predict_step(const ScalingProfile& profile, const Network& network, int ranks, int ranks_per_node,
                            int64_t global_batch) {
  StepPrediction s = predict_raw(profile, network, ranks, ranks_per_node, static_cast<double>(global_batch));
  const StepPrediction one = predict_raw(profile, network, 1, 1, s.per_rank_batch);
  s.efficiency = one.throughput > 0 && std::isfinite(one.throughput) ? s.throughput / (s.ranks * one.throughput) : 1.0;
  return s;
}

std::vector<PointError> prediction_errors(const ScalingProfile& profile, const Network& network,
                                          const std::vector<MeasuredStep>& points) {
  int min_ranks = std::numeric_limits<int>::max();
  for (const MeasuredStep& m : points)
    if (m.global_batch > 0 && m.compute_s > 0) min_ranks = std::min(min_ranks, m.ranks);
  std::vector<PointError> out;
  for (const MeasuredStep& m : points) {
    PointError e;
    e.measured = m;
    e.predicted = predict_step(profile, network, m.ranks, m.ranks_per_node, std::max<int64_t>(m.global_batch, 1));
    e.rel_error = m.step_s > 0 ? (e.predicted.total_s - m.step_s) / m.step_s : std::numeric_limits<double>::quiet_NaN();
    e.in_sample = m.ranks == min_ranks;
    out.push_back(e);
  }
  return out;
}

}  // namespace mlpd::scaling
