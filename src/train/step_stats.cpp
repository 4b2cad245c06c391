#include "train/step_stats.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace mlpd {

int64_t warmup_steps_to_skip(int64_t steps) {
  if (steps <= 4) return 0;
  return std::min<int64_t>(std::max<int64_t>(2, steps / 10), 20);
}

StepStatsSummary summarize_step_times(const std::vector<std::vector<StepTimes>>& per_rank, int ranks_per_node,
                                      int64_t skip) {
  StepStatsSummary s;
  s.ranks = static_cast<int>(per_rank.size());
  s.ranks_per_node = ranks_per_node;
  if (per_rank.empty()) return s;
  const size_t n_steps = per_rank[0].size();
  for (const auto& r : per_rank)
    if (r.size() != n_steps) throw std::invalid_argument("summarize_step_times: ranks report different step counts");
  const size_t first = std::min(n_steps, static_cast<size_t>(std::max<int64_t>(0, skip)));
  s.skipped = static_cast<int64_t>(first);
  s.steps = static_cast<int64_t>(n_steps - first);
  if (s.steps == 0) return s;
  const double count = static_cast<double>(s.steps) * static_cast<double>(s.ranks);
  double work = 0.0;
  for (size_t st = first; st < n_steps; ++st) {
    double slowest = 0.0;
    for (const auto& r : per_rank) slowest = std::max(slowest, r[st].compute);
    for (const auto& r : per_rank) {
      const StepTimes& t = r[st];
      const double skew = slowest - t.compute;
      const double exposed = std::max(0.0, t.wait - skew);
      const double skew_waited = std::min(skew, t.wait);
      s.compute_s += t.compute;
      s.skew_s += skew_waited;
      s.comm_s += exposed;
      s.other_s += t.other;
      s.comm_busy_s += t.busy;
      s.comm_bytes += t.bytes;
    }
    work += per_rank[0][st].work;
  }
  s.compute_s /= count;
  s.skew_s /= count;
  s.comm_s /= count;
  s.other_s /= count;
  s.comm_busy_s /= count;
  s.comm_bytes /= count;
  s.step_s = s.compute_s + s.skew_s + s.comm_s + s.other_s;
  s.global_batch = work / static_cast<double>(s.steps);
  s.throughput = s.step_s > 0.0 ? s.global_batch / s.step_s : 0.0;
  double cv = 0.0;
  for (const auto& r : per_rank) {
    double mean = 0.0, sq = 0.0;
    for (size_t st = first; st < n_steps; ++st) mean += r[st].compute;
    mean /= static_cast<double>(s.steps);
    for (size_t st = first; st < n_steps; ++st) sq += (r[st].compute - mean) * (r[st].compute - mean);
    const double sd = s.steps > 1 ? std::sqrt(sq / static_cast<double>(s.steps - 1)) : 0.0;
    cv += mean > 0.0 ? sd / mean : 0.0;
  }
  s.compute_cv = cv / static_cast<double>(s.ranks);
  return s;
}

std::vector<std::vector<StepTimes>> gather_step_times(const World& w, const std::vector<StepTimes>& mine) {
  constexpr int kFields = 6;
  std::vector<double> flat;
  flat.reserve(mine.size() * kFields);
  for (const StepTimes& t : mine) flat.insert(flat.end(), {t.compute, t.wait, t.other, t.busy, t.work, t.bytes});
  int count = static_cast<int>(flat.size());
  std::vector<int> counts(w.rank == 0 ? w.size : 0), displs;
  MPI_CHECK(MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, w.comm));
  std::vector<double> all;
  if (w.rank == 0) {
    displs.resize(w.size);
    int at = 0;
    for (int r = 0; r < w.size; ++r) {
      displs[r] = at;
      at += counts[r];
    }
    all.resize(static_cast<size_t>(at));
  }
  MPI_CHECK(MPI_Gatherv(flat.data(), count, MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE, 0,
                        w.comm));
  std::vector<std::vector<StepTimes>> out;
  if (w.rank != 0) return out;
  out.resize(w.size);
  for (int r = 0; r < w.size; ++r)
    for (int i = 0; i < counts[r]; i += kFields) {
      const double* p = all.data() + displs[r] + i;
      out[r].push_back({p[0], p[1], p[2], p[3], p[4], p[5]});
    }
  return out;
}

std::string step_stats_json(const StepStatsSummary& s, const std::string& extra_fields_json) {
  nlohmann::json j = extra_fields_json.empty() ? nlohmann::json::object() : nlohmann::json::parse(extra_fields_json);
  j["ranks"] = s.ranks;
  j["ranks_per_node"] = s.ranks_per_node;
  j["steps"] = s.steps;
  j["skipped_steps"] = s.skipped;
  j["global_batch"] = s.global_batch;
  j["step_s"] = s.step_s;
  j["compute_s"] = s.compute_s;
  j["comm_s"] = s.comm_s;
  j["skew_s"] = s.skew_s;
  j["other_s"] = s.other_s;
  j["compute_cv"] = s.compute_cv;
  j["comm_busy_s"] = s.comm_busy_s;
  j["comm_bytes"] = s.comm_bytes;
  j["throughput"] = s.throughput;
  return j.dump(2) + "\n";
}

}  // namespace mlpd
