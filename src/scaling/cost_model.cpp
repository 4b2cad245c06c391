#include "scaling/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"

namespace mlpd::scaling {

const char* algo_name(AllreduceAlgo a) {
  switch (a) {
    case AllreduceAlgo::ring: return "ring";
    case AllreduceAlgo::tree: return "tree";
    case AllreduceAlgo::allgather: return "allgather";
    case AllreduceAlgo::hierarchical: return "hierarchical";
  }
  return "?";
}

std::optional<AllreduceAlgo> parse_algo(const std::string& name) {
  for (AllreduceAlgo a :
       {AllreduceAlgo::ring, AllreduceAlgo::tree, AllreduceAlgo::allgather, AllreduceAlgo::hierarchical})
    if (name == algo_name(a)) return a;
  return std::nullopt;
}

std::string algo_names_text() { return "ring, tree, allgather, hierarchical"; }

Link link_from_gbps(double alpha_us, double gbits_per_s, double efficiency) {
  Link l;
  l.alpha_s = alpha_us * 1e-6;
  const double bytes_per_s = gbits_per_s * 1e9 / 8.0 * efficiency;
  l.beta_s_per_byte = bytes_per_s > 0 ? 1.0 / bytes_per_s : std::numeric_limits<double>::infinity();
  return l;
}

double link_gbytes_per_s(const Link& l) {
  return l.beta_s_per_byte > 0 ? 1e-9 / l.beta_s_per_byte : std::numeric_limits<double>::infinity();
}

namespace {

int ceil_log2(int p) {
  int k = 0;
  while ((1 << k) < p) ++k;
  return k;
}

// α and β coefficients of a flat algorithm over p ranks (one link).
void flat_terms(AllreduceAlgo a, int p, double n, double& ca, double& cb) {
  ca = cb = 0.0;
  if (p <= 1) return;
  switch (a) {
    case AllreduceAlgo::ring:
      ca = 2.0 * (p - 1);
      cb = 2.0 * (p - 1) / p * n;
      return;
    case AllreduceAlgo::tree:
      ca = 2.0 * ceil_log2(p);
      cb = 2.0 * n;
      return;
    case AllreduceAlgo::allgather:
      ca = p - 1.0;
      cb = (p - 1.0) * n;
      return;
    case AllreduceAlgo::hierarchical: break;  // not flat
  }
}

}  // namespace

AllreduceTerms allreduce_terms(AllreduceAlgo a, int ranks, int ranks_per_node, double bytes) {
  AllreduceTerms t;
  const int p = std::max(1, ranks);
  const int q = std::clamp(ranks_per_node, 1, p);
  if (a == AllreduceAlgo::hierarchical) {
    const int g = (p + q - 1) / q;
    flat_terms(AllreduceAlgo::ring, q, bytes, t.a_intra, t.b_intra);
    flat_terms(AllreduceAlgo::ring, g, bytes / q, t.a_inter, t.b_inter);
    return t;
  }
  if (p <= q)
    flat_terms(a, p, bytes, t.a_intra, t.b_intra);
  else
    flat_terms(a, p, bytes, t.a_inter, t.b_inter);
  return t;
}

AllreduceCost allreduce_cost(AllreduceAlgo a, const Link& intra, const Link& inter, int ranks, int ranks_per_node,
                             double bytes) {
  const AllreduceTerms t = allreduce_terms(a, ranks, ranks_per_node, bytes);
  AllreduceCost c;
  // A zero coefficient times an infinite β (a link of bandwidth 0 never used) stays 0.
  auto mul = [](double coef, double v) { return coef == 0.0 ? 0.0 : coef * v; };
  c.alpha_part_s = mul(t.a_intra, intra.alpha_s) + mul(t.a_inter, inter.alpha_s);
  c.beta_part_s = mul(t.b_intra, intra.beta_s_per_byte) + mul(t.b_inter, inter.beta_s_per_byte);
  return c;
}

double allreduce_seconds(AllreduceAlgo a, const Link& intra, const Link& inter, int ranks, int ranks_per_node,
                         double bytes) {
  return allreduce_cost(a, intra, inter, ranks, ranks_per_node, bytes).total_s();
}

AllreduceAlgo fastest_algo(const Link& intra, const Link& inter, int ranks, int ranks_per_node, double bytes) {
  AllreduceAlgo best = AllreduceAlgo::ring;
  double best_s = std::numeric_limits<double>::infinity();
  for (AllreduceAlgo a : {AllreduceAlgo::ring, AllreduceAlgo::tree, AllreduceAlgo::hierarchical}) {
    const double s = allreduce_seconds(a, intra, inter, ranks, ranks_per_node, bytes);
    if (s < best_s) {
      best_s = s;
      best = a;
    }
  }
  return best;
}

namespace {

struct Row {
  double x1, x2;  // coefficients of α and β, divided by the measured time
};

double sum_sq_residual(const std::vector<Row>& rows, double alpha, double beta) {
  double s = 0.0;
  for (const Row& r : rows) {
    const double e = r.x1 * alpha + r.x2 * beta - 1.0;
    s += e * e;
  }
  return s;
}

}  // namespace

LinkFit fit_alpha_beta(AllreduceAlgo a, const std::vector<CommSample>& samples) {
  std::vector<Row> rows;
  for (const CommSample& s : samples) {
    if (s.ranks <= 1 || !(s.seconds > 0)) continue;
    const AllreduceTerms t = allreduce_terms(a, s.ranks, s.ranks_per_node, s.bytes);
    rows.push_back({(t.a_intra + t.a_inter) / s.seconds, (t.b_intra + t.b_inter) / s.seconds});
  }
  if (rows.empty())
    throw UserError("fit_alpha_beta: no communication sample at more than one rank with a positive time", 2);

  // Normal equations of the weighted problem: [S11 S12; S12 S22] [α β]' = [S1y S2y]' with y = 1.
  double s11 = 0, s12 = 0, s22 = 0, s1y = 0, s2y = 0;
  for (const Row& r : rows) {
    s11 += r.x1 * r.x1;
    s12 += r.x1 * r.x2;
    s22 += r.x2 * r.x2;
    s1y += r.x1;
    s2y += r.x2;
  }
  // One-parameter fits (the other held at 0), each >= 0 since every coefficient is >= 0.
  const double alpha_only = s11 > 0 ? s1y / s11 : 0.0;
  const double beta_only = s22 > 0 ? s2y / s22 : 0.0;

  LinkFit fit;
  const double det = s11 * s22 - s12 * s12;
  bool solved = false;
  if (det > 1e-12 * s11 * s22) {
    const double alpha = (s1y * s22 - s2y * s12) / det;
    const double beta = (s2y * s11 - s1y * s12) / det;
    if (alpha >= 0 && beta >= 0) {
      fit.link = {alpha, beta};
      solved = true;
    } else {
      fit.alpha_clamped = alpha < 0;
      fit.beta_clamped = beta < 0;
    }
  }
  if (!solved) {
    // A negative coefficient (or a singular system: one size at one rank count) leaves the other
    // alone: keep whichever one-parameter fit explains the data better (β on a tie).
    const double r_alpha = sum_sq_residual(rows, alpha_only, 0.0);
    const double r_beta = sum_sq_residual(rows, 0.0, beta_only);
    if (fit.beta_clamped && !fit.alpha_clamped)
      fit.link = {alpha_only, 0.0};
    else if (fit.alpha_clamped && !fit.beta_clamped)
      fit.link = {0.0, beta_only};
    else
      fit.link = r_alpha < r_beta ? Link{alpha_only, 0.0} : Link{0.0, beta_only};
  }

  double sq = 0.0;
  for (const CommSample& s : samples) {
    if (s.ranks <= 1 || !(s.seconds > 0)) {
      fit.rel_error.push_back(std::numeric_limits<double>::quiet_NaN());
      continue;
    }
    const double pred = allreduce_seconds(a, fit.link, fit.link, s.ranks, s.ranks_per_node, s.bytes);
    const double e = (pred - s.seconds) / s.seconds;
    fit.rel_error.push_back(e);
    sq += e * e;
    ++fit.samples_used;
  }
  fit.rms_rel_error = std::sqrt(sq / fit.samples_used);
  return fit;
}

}  // namespace mlpd::scaling
