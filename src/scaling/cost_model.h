// The alpha-beta cost of one allreduce of `bytes` over `ranks` ranks, per algorithm, and the fit of
// alpha and beta to measured times (comm-bench).
//
// Units: seconds, bytes. A Link is (alpha: seconds per message, beta: seconds per byte). The
// reduction's arithmetic (gamma, seconds per byte added) is folded into beta: on the host it is a
// memory-bound sum that scales with the bytes exactly like the transfer, so a fit cannot tell the
// two apart and the model does not try.
//
// Formulas (p ranks, q ranks per node, g = ceil(p / q) nodes, n bytes per rank):
//   ring          2(p-1)·α + 2(p-1)/p·n·β
//                 reduce-scatter + allgather (Patarasuk & Yuan 2009; NCCL's ring)
//   tree          2⌈log2 p⌉·α + 2·n·β
//                 binary tree, reduce up + broadcast down, PIPELINED in chunks: every link carries
//                 n up and n down; the pipeline fill is folded into α (NCCL's double binary tree
//                 reaches this bound)
//   allgather     (p-1)·α + (p-1)·n·β
//                 our host `mpi` backend (comm/README.md): one MPI_Iallgather of every rank's
//                 whole buffer (each rank receives (p-1)·n bytes in p-1 steps), then the canonical
//                 sum locally
//   hierarchical  2(q-1)·α_intra + 2(q-1)/q·n·β_intra + 2(g-1)·α_inter + 2(g-1)/g·(n/q)·β_inter
//                 reduce-scatter + allgather inside the node, then a ring over the g nodes on each
//                 rail: every local rank owns n/q bytes and is one rail (comm/README.md,
//                 "shared-memory node step": a chain per rail moves ≈ 2x its share in 2(g-1) hops)
// Links of a flat algorithm (ring, tree, allgather): the intra-node link when every rank fits in
// one node (p <= q), else the inter-node link for the whole collective (the slowest hop bounds a
// ring, and a tree's levels wait for their slowest edge).
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace mlpd::scaling {

enum class AllreduceAlgo { ring, tree, allgather, hierarchical };

const char* algo_name(AllreduceAlgo a);                            // "ring", "tree", ...
std::optional<AllreduceAlgo> parse_algo(const std::string& name);  // nullopt when unknown
std::string algo_names_text();                                     // "ring, tree, allgather, hierarchical"

struct Link {
  double alpha_s = 0.0;          // latency per message (per step of the algorithm), seconds
  double beta_s_per_byte = 0.0;  // seconds per byte on the wire, reduction (gamma) folded in
};

// A link from the figures people quote: alpha in microseconds, line rate in Gb/s (bits) times an
// efficiency in (0, 1] (the fraction of the line rate a collective's busbw reaches).
Link link_from_gbps(double alpha_us, double gbits_per_s, double efficiency);
// Bandwidth of a link in GB/s (bytes): 1e-9 / beta (infinite for beta 0).
double link_gbytes_per_s(const Link& l);

// The coefficients of the four constants in one allreduce's time: time = a_intra·α_intra +
// b_intra·β_intra + a_inter·α_inter + b_inter·β_inter (b_* already multiplied by the bytes).
struct AllreduceTerms {
  double a_intra = 0.0, b_intra = 0.0, a_inter = 0.0, b_inter = 0.0;
};
// ranks >= 1, ranks_per_node >= 1 (clamped to ranks), bytes >= 0. Hierarchical with ranks not a
// multiple of ranks_per_node: g = ceil(p / q) nodes (the last node partly filled; modelled as full).
AllreduceTerms allreduce_terms(AllreduceAlgo a, int ranks, int ranks_per_node, double bytes);

// One allreduce's time, split into its latency (α) and bandwidth (β) parts.
struct AllreduceCost {
  double alpha_part_s = 0.0;
  double beta_part_s = 0.0;
  double total_s() const { return alpha_part_s + beta_part_s; }
};
AllreduceCost allreduce_cost(AllreduceAlgo a, const Link& intra, const Link& inter, int ranks, int ranks_per_node,
                             double bytes);
double allreduce_seconds(AllreduceAlgo a, const Link& intra, const Link& inter, int ranks, int ranks_per_node,
                         double bytes);
// The fastest of ring, tree and hierarchical at this size (what NCCL's tuner does per call, by its
// own alpha-beta model); allgather is our host backend's, never chosen for a GPU cluster.
AllreduceAlgo fastest_algo(const Link& intra, const Link& inter, int ranks, int ranks_per_node, double bytes);

// One measured allreduce (comm-bench): `bytes` per rank, `seconds` per call.
struct CommSample {
  int ranks = 1;
  int ranks_per_node = 1;
  double bytes = 0.0;
  double seconds = 0.0;
};

struct LinkFit {
  Link link;
  std::vector<double> rel_error;  // per sample, in input order: (predicted - measured) / measured;
                                  // NaN for a sample that was skipped (ranks == 1 or seconds <= 0)
  double rms_rel_error = 0.0;     // over the samples used
  int samples_used = 0;
  bool alpha_clamped = false;  // the unconstrained solution had α < 0: refitted with α = 0
  bool beta_clamped = false;   // likewise β
};

// Least squares on relative error: minimise Σ ((a_i·α + b_i·β − t_i) / t_i)² with α, β >= 0, where
// (a_i, b_i) are the algorithm's coefficients at the sample's ranks, ranks per node and bytes.
// All samples are taken on one kind of link (intra == inter: one machine, or pretend nodes of it),
// so the hierarchical formula's two links are one here. Samples at 1 rank (no communication) or with
// seconds <= 0 are skipped. UserError (exit 2) when no sample remains.
LinkFit fit_alpha_beta(AllreduceAlgo a, const std::vector<CommSample>& samples);

}  // namespace mlpd::scaling
