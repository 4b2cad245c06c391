#include "scaling/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "core/check.h"
#include "mlperf/config.h"
#include "mlperf/keys.h"
#include "mlperf/rules.h"
#include "scaling/profile_json.h"

namespace mlpd::scaling {

const char* bound_name(Bound b) {
  switch (b) {
    case Bound::compute: return "compute";
    case Bound::bandwidth: return "bandwidth";
    case Bound::latency: return "latency";
    case Bound::overhead: return "overhead";
  }
  return "?";
}

namespace {

Bound bound_of(const StepPrediction& s) {
  const double compute = s.compute_s + s.skew_s;
  if (s.other_s > compute && s.other_s > s.comm_s) return Bound::overhead;
  if (s.comm_s > compute)
    return s.allreduce.beta_part_s >= s.allreduce.alpha_part_s ? Bound::bandwidth : Bound::latency;
  return Bound::compute;
}

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

std::string pct(double ratio) { return fmt("%+.1f%%", 100.0 * (ratio - 1.0)); }

// Seconds as "96.1 s", "12.3 min" or "2.10 h", the unit chosen by `unit_of` (one unit per
// sentence).
std::string duration(double s, double unit_of) {
  if (unit_of < 120) return fmt("%.1f s", s);
  if (unit_of < 7200) return fmt("%.1f min", s / 60);
  return fmt("%.2f h", s / 3600);
}

// Per-step cost that does not scale with the per-rank batch: what a larger batch amortises.
double per_step_fixed_s(const StepPrediction& s, const ScalingProfile& p) {
  return s.comm_s + s.other_s + p.fixed_compute_s * s.contention;
}

std::string explain(const Plan& p) {
  const PlanRow& b = p.rows[p.best];
  std::string w =
      "Chosen: global batch " + std::to_string(b.global_batch) + " (" + fmt("%.0f", b.step.per_rank_batch) +
      " per rank): " + duration(b.time_s, b.time_s) + " to train, " + fmt("%.1f", b.epochs.epochs) + " epochs of " +
      std::to_string(b.steps_per_epoch) + " steps at " + fmt("%.2f", b.step.total_s * 1e3) + " ms, " +
      bound_name(b.bound) + "-bound (comm " + fmt("%.2f", b.step.comm_s * 1e3) + " ms exposed of a " +
      fmt("%.2f", b.step.allreduce.total_s() * 1e3) + " ms " + algo_name(p.inputs.profile.algo) + " allreduce, " +
      (b.step.allreduce.alpha_part_s > b.step.allreduce.beta_part_s ? "mostly latency" : "mostly bandwidth") + ").";
  if (p.best > 0) {
    const PlanRow& s = p.rows[p.best - 1];
    w += " A smaller batch pays the per-step costs (" + fmt("%.2f", per_step_fixed_s(s.step, p.inputs.profile) * 1e3) +
         " ms of allreduce, optimizer and fixed " + "compute per step) more often: batch " +
         std::to_string(s.global_batch) + " takes " + duration(s.time_s, b.time_s) + " (" + pct(s.time_s / b.time_s) +
         ")";
    if (s.epochs.epochs < b.epochs.epochs - 1e-9) w += " despite " + fmt("%.1f", s.epochs.epochs) + " epochs";
    w += ".";
  } else if (p.rows.size() > 1) {
    w += " It is the smallest candidate: the per-step costs saved by a larger batch are worth less than the "
         "epochs it adds.";
  }
  if (p.best + 1 < p.rows.size()) {
    const PlanRow& l = p.rows[p.best + 1];
    if (l.epochs.epochs > b.epochs.epochs + 1e-9)
      w += " A larger batch needs more epochs: batch " + std::to_string(l.global_batch) + " needs " +
           fmt("%.1f", l.epochs.epochs) + " (" + pct(l.epochs.epochs / b.epochs.epochs) + ") and takes " +
           duration(l.time_s, b.time_s) + " (" + pct(l.time_s / b.time_s) + ")" +
           (l.past_critical ? ", past the critical batch" : "") + ".";
    else
      w += " Batch " + std::to_string(l.global_batch) + " takes " + duration(l.time_s, b.time_s) + " (" +
           pct(l.time_s / b.time_s) + ").";
  } else if (p.rows.size() > 1) {
    w += " It is the largest candidate: per-step costs still shrink faster than epochs grow; a larger per-rank "
         "batch (--max-per-rank-batch, --batches) may be faster still if the device holds it.";
  }
  if (b.epochs.kind == EpochsKind::extrapolated) w += " Its epochs are extrapolated (McCandlish fit).";
  if (b.epochs.kind == EpochsKind::constant) w += " Epochs are held constant (one convergence point).";
  return w;
}

}  // namespace

Plan make_plan(const PlanInputs& in) {
  if (in.ranks < 1) throw UserError("plan: ranks must be >= 1, got " + std::to_string(in.ranks), 2);
  if (in.train_samples < 1) throw UserError("plan: the scale has no train_samples (samples per epoch) to plan with", 2);
  if (in.batches.empty()) throw UserError("plan: no candidate global batch", 2);
  Plan p;
  p.inputs = in;
  std::set<int64_t> sorted(in.batches.begin(), in.batches.end());
  for (int64_t B : sorted) {
    if (B < in.ranks || B % in.ranks != 0)
      throw UserError("plan: global batch " + std::to_string(B) + " is not a positive multiple of the " +
                          std::to_string(in.ranks) + " ranks",
                      2);
    PlanRow r;
    r.global_batch = B;
    r.epochs = epochs_at(in.convergence, B);
    r.steps_per_epoch = (in.train_samples + B - 1) / B;
    r.steps = r.epochs.epochs * static_cast<double>(r.steps_per_epoch);
    r.step = predict_step(in.profile, in.network, in.ranks, in.ranks_per_node, B);
    r.evals = std::ceil(r.epochs.epochs / std::max(1, in.profile.eval_every_epochs));
    r.eval_s = r.evals * eval_seconds(in.profile, in.ranks, in.ranks_per_node, in.eval_samples);
    r.time_s = r.steps * r.step.total_s + r.eval_s;
    r.bound = bound_of(r.step);
    r.past_critical = in.convergence.past_critical(static_cast<double>(B));
    p.rows.push_back(r);
  }
  for (size_t i = 1; i < p.rows.size(); ++i)
    if (p.rows[i].time_s < p.rows[p.best].time_s) p.best = i;
  p.why = explain(p);
  return p;
}

std::vector<int64_t> default_batches(const ConvergenceModel& m, int ranks, int max_per_rank_batch) {
  std::set<int64_t> all;
  for (int64_t b = 1; b <= max_per_rank_batch; b *= 2) all.insert(b * ranks);
  for (const RcpPoint& r : m.rcps)
    if (r.global_batch % ranks == 0 && r.global_batch / ranks <= max_per_rank_batch) all.insert(r.global_batch);
  if (m.rcps.size() >= 2) {
    const int64_t lo = m.rcps.front().global_batch, hi = m.rcps.back().global_batch;
    std::vector<int64_t> inside;
    for (int64_t b : all)
      if (b >= lo && b <= hi) inside.push_back(b);
    if (!inside.empty()) return inside;
  }
  return {all.begin(), all.end()};
}

namespace {


const char* op_text(CondOp op) {
  switch (op) {
    case CondOp::Eq: return "=";
    case CondOp::Ne: return "!=";
    case CondOp::Lt: return "<";
    case CondOp::Ge: return ">=";
  }
  return "?";
}

}  // namespace

std::vector<std::string> batch_rule_notes(const BenchmarkSpec& spec, const std::string& scale, int64_t global_batch,
                                          int ranks) {
  std::vector<std::string> out;
  const ScaleSpec& sc = find_scale(spec, scale);
  nlohmann::json config;
  try {
    config = resolve_config(sc.defaults_yaml, "",
                            {std::string(keys::kGlobalBatchSize) + "=" + std::to_string(global_batch)});
  } catch (const UserError& e) {
    out.push_back(std::string("the scale's defaults cannot take this batch: ") + e.what());
    return out;
  }
  if (config.contains(keys::kOptName))
    out.push_back("optimizer (the scale's defaults): " + config[keys::kOptName].get<std::string>());
  for (const RuleRow& r : spec.rules) {
    if (std::string(r.scale) != "*" && r.scale != scale) continue;
    bool names_batch = false;
    for (const RuleCond& c : r.when) names_batch = names_batch || std::string(c.key) == keys::kGlobalBatchSize;
    if (!names_batch) continue;
    bool applies = true;
    std::string conds;
    for (const RuleCond& c : r.when) {
      applies = applies && cond_holds(c, config);
      conds += (conds.empty() ? "" : " and ") + std::string(c.key) + " " + op_text(c.op) + " " +
               (c.str ? std::string(c.str) : fmt("%g", c.num));
    }
    out.push_back(std::string("rule ") + r.name + (applies ? ": applies" : ": does not apply") + " (when " + conds +
                  "; " + r.source + ")");
  }
  for (const RuleViolation& v : check_rules(spec, scale, config, RunShape{ranks}))
    out.push_back("the defaults at this batch break " + v.message);
  return out;
}

std::string format_plan_table(const Plan& p) {
  std::string s;
  char line[320];
  std::snprintf(line, sizeof line, "  %-9s %8s %7s %-6s %8s %9s %8s %8s %8s %9s %6s %8s %10s  %s\n", "batch",
                "/rank", "epochs", "(src)", "steps", "compute", "comm", "skew", "other", "step", "eff", "eval", "time",
                "bound");
  s += line;
  std::snprintf(line, sizeof line, "  %-9s %8s %7s %-6s %8s %9s %8s %8s %8s %9s %6s %8s %10s\n", "", "", "", "", "",
                "ms", "ms", "ms", "ms", "ms", "%", "min", "min");
  s += line;
  for (size_t i = 0; i < p.rows.size(); ++i) {
    const PlanRow& r = p.rows[i];
    const std::string mark = std::string(i == p.best ? "*" : " ") + (r.past_critical ? "!" : " ");
    std::snprintf(line, sizeof line,
                  "%s%-9lld %8.0f %7.2f %-6s %8.0f %9.3f %8.3f %8.3f %8.3f %9.3f %6.1f %8.2f %9.2f  %s\n",
                  mark.c_str(), static_cast<long long>(r.global_batch), r.step.per_rank_batch, r.epochs.epochs,
                  epochs_kind_name(r.epochs.kind), r.steps, r.step.compute_s * 1e3, r.step.comm_s * 1e3,
                  r.step.skew_s * 1e3, r.step.other_s * 1e3, r.step.total_s * 1e3, r.step.efficiency * 100,
                  r.eval_s / 60, r.time_s / 60, bound_name(r.bound));
    s += line;
  }
  s += "  * chosen (least time)   ! past the critical batch (E(B) > 2 E_min)\n";
  s += "  src: rcp = at an RCP point, interp = between two (rcp_reference), extrap = McCandlish fit,\n"
       "       const = one convergence point, epochs held\n";
  return s;
}

nlohmann::json plan_to_json(const Plan& p) {
  nlohmann::json rows = nlohmann::json::array();
  for (const PlanRow& r : p.rows) {
    rows.push_back({{"global_batch", r.global_batch},
                    {"per_rank_batch", r.step.per_rank_batch},
                    {"epochs", r.epochs.epochs},
                    {"epochs_kind", epochs_kind_name(r.epochs.kind)},
                    {"epochs_note", r.epochs.note},
                    {"steps_per_epoch", r.steps_per_epoch},
                    {"steps", r.steps},
                    {"compute_s", r.step.compute_s},
                    {"comm_s", r.step.comm_s},
                    {"allreduce_alpha_s", r.step.allreduce.alpha_part_s},
                    {"allreduce_beta_s", r.step.allreduce.beta_part_s},
                    {"skew_s", r.step.skew_s},
                    {"other_s", r.step.other_s},
                    {"step_s", r.step.total_s},
                    {"throughput", r.step.throughput},
                    {"efficiency", r.step.efficiency},
                    {"evaluations", r.evals},
                    {"eval_s", r.eval_s},
                    {"time_to_train_s", r.time_s},
                    {"bound", bound_name(r.bound)},
                    {"past_critical_batch", r.past_critical}});
  }
  const PlanInputs& in = p.inputs;
  nlohmann::json conv = {{"summary", in.convergence.summary}, {"mccandlish_valid", in.convergence.fit.valid}};
  if (in.convergence.fit.valid) {
    conv["e_min"] = in.convergence.fit.e_min;
    conv["b_crit"] =
        std::isfinite(in.convergence.fit.b_crit) ? nlohmann::json(in.convergence.fit.b_crit) : nlohmann::json();
  }
  return {{"benchmark", in.benchmark},
          {"scale", in.scale},
          {"ranks", in.ranks},
          {"ranks_per_node", in.ranks_per_node},
          {"train_samples", in.train_samples},
          {"network",
           {{"name", in.network.name},
            {"intra", to_json(in.network.intra)},
            {"inter", to_json(in.network.inter)},
            {"source", in.network.source}}},
          {"profile", to_json(in.profile)},
          {"convergence", conv},
          {"rows", rows},
          {"chosen_global_batch", p.rows[p.best].global_batch},
          {"why", p.why}};
}

}  // namespace mlpd::scaling
