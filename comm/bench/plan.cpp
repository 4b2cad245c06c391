#include "comm/bench/plan.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>

#include "comm/reduce_kernels.h"
#include "core/check.h"
#include "kernels/device.h"

namespace mlpd::comm_bench {

namespace {

constexpr int kUsage = 2;  // exit code of a usage error
constexpr int kMaxIters = 1000000;
constexpr int kMaxSizes = 100000;

[[noreturn]] void usage_error(const std::string& msg) { throw UserError(msg, kUsage); }

// Sizes from min to max bytes, times factor: floats per size, at least one, a multiple of the
// ranks for the per-rank-block collectives.
std::vector<size_t> sweep_counts(size_t min_bytes, size_t max_bytes, double factor, const Collective& op, int ranks) {
  std::vector<size_t> counts;
  for (double b = static_cast<double>(min_bytes); b <= static_cast<double>(max_bytes) * 1.0000001; b *= factor) {
    size_t count = std::max<size_t>(1, static_cast<size_t>(b) / 4);
    if (op.per_rank_blocks)
      count = std::max<size_t>(1, count / static_cast<size_t>(ranks)) * static_cast<size_t>(ranks);
    counts.push_back(count);
    if (static_cast<double>(count) * 4 * factor < b) break;  // guard against a factor that does not grow
  }
  return counts;
}

// Float buffers of `count` that one rank holds at a time on a path (the largest size dominates).
int buffers_per_rank(const Options& o, PathKind path) {
  if (o.side_by_side) return 4;  // plain send + recv, and the bucketed path's parameters + gradients
  switch (path) {
    case PathKind::communicator:
      return 1;  // in place
    case PathKind::mpi:
    case PathKind::bucketed:  // a ParamStore holds parameters and gradients (on the GPU: host
                              // parameters and the host inputs; the device holds as much again)
    case PathKind::nccl:      // host inputs and results; the device holds as much again
      return 2;
  }
  return 2;
}

std::string shortest(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

double gib(double bytes) { return bytes / (1024.0 * 1024 * 1024); }

// The largest size must fit: MPI counts are int, and the buffers of all ranks on this node must
// stay under half of its memory (above that the run would swap or be killed, not measure).
void check_fits(const Options& o, const Plan& p, const World& w) {
  const size_t largest = *std::max_element(p.counts.begin(), p.counts.end());
  const double per_rank = static_cast<double>(largest) * sizeof(float) * buffers_per_rank(o, p.path);
  const double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  if (per_rank * w.local_size > memory / 2) {
    char msg[256];
    std::snprintf(msg, sizeof msg,
                  "--maxbytes %s needs %.1f GiB of buffers per rank, %d rank(s) on this node: more than half of its "
                  "%.1f GiB of memory",
                  o.max_bytes.c_str(), gib(per_rank), w.local_size, gib(memory));
    usage_error(msg);
  }
  if (largest > static_cast<size_t>(INT_MAX))
    usage_error("--maxbytes " + o.max_bytes + " is more than 2^31-1 floats, the most one MPI call takes");
}

std::string collective_names() {
  std::string names;
  for (const Collective* c : kCollectives) names += (names.empty() ? "" : ", ") + std::string(c->name);
  return names;
}

bool is_one_of(const std::string& s, std::initializer_list<const char*> names) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return s == n; });
}

}  // namespace

size_t parse_size(const std::string& s) {
  if (s.empty()) usage_error("empty size");
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (...) {
    usage_error("bad size '" + s + "' (expected e.g. 8, 64K, 256M, 1G)");
  }
  const std::string suffix = s.substr(pos);
  double unit = 1;
  if (suffix == "K" || suffix == "k")
    unit = 1024.0;
  else if (suffix == "M" || suffix == "m")
    unit = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g")
    unit = 1024.0 * 1024 * 1024;
  else if (!suffix.empty() && suffix != "B" && suffix != "b")
    usage_error("bad size suffix in '" + s + "' (K, M or G)");
  if (!std::isfinite(v)) usage_error("bad size '" + s + "'");
  if (v < 0) usage_error("negative size '" + s + "'");
  if (v * unit > 1e18) usage_error("size '" + s + "' is too large");
  return static_cast<size_t>(v * unit);
}

Plan plan_bench(const Options& o, const World& w) {
  const size_t min_bytes = parse_size(o.min_bytes), max_bytes = parse_size(o.max_bytes);
  if (min_bytes == 0 || max_bytes < min_bytes) usage_error("need 0 < min bytes <= max bytes");
  if (!(o.factor > 1)) usage_error("-f/--stepfactor must be > 1, got " + shortest(o.factor));
  // Each iteration's time is kept (for the median): bounded, so a typo cannot exhaust memory.
  if (o.iters < 1 || o.iters > kMaxIters)
    usage_error("-n/--iters must be 1 to " + std::to_string(kMaxIters) + ", got " + std::to_string(o.iters));
  if (o.warmup < 0 || o.warmup > kMaxIters)
    usage_error("-w/--warmup_iters must be 0 to " + std::to_string(kMaxIters) + ", got " + std::to_string(o.warmup));
  const double sizes = std::log(static_cast<double>(max_bytes) / static_cast<double>(min_bytes)) / std::log(o.factor);
  if (sizes > kMaxSizes)
    usage_error("-f/--stepfactor " + shortest(o.factor) + " makes " + shortest(sizes) + " sizes from " + o.min_bytes +
                " to " + o.max_bytes + "; at most " + std::to_string(kMaxSizes));
  if (!(o.comm_timeout > 0)) usage_error("--comm-timeout must be > 0 seconds");
  if (o.bucket_mb < 0 || o.first_bucket_mb < 0 || o.small_kb < 0 || o.chunk_kb < 0 || o.compute_us < 0)
    usage_error("--bucket-mb, --first-bucket-mb, --small-kb, --chunk-kb and --compute-us must be >= 0");
  if (o.test_ranks_per_node < 0) usage_error("--test-ranks-per-node must be >= 0");

  Plan p;
  p.op = find_collective(o.op);
  if (!p.op) usage_error("unknown --op '" + o.op + "' (expected " + collective_names() + ")");
  if (!is_one_of(o.backend, {"mpi", "hierarchical", "nccl"}))
    usage_error("unknown --backend '" + o.backend + "' (expected mpi, hierarchical or nccl)");
  try {
    parse_precision(o.precision);
  } catch (const UserError& e) {
    usage_error(e.what());
  }
  try {
    p.device = parse_device(o.device);
  } catch (const UserError& e) {
    usage_error(e.what());
  }
  // --backend nccl is --device cuda with the plain collective (kept for scripts that use it).
  if (o.backend == "nccl" && !o.bucketed && !o.side_by_side) p.device = Device::cuda;
  const bool gpu = p.device == Device::cuda;
  const std::string gpu_flag = o.device == "cuda" ? "--device cuda" : "--backend nccl";
  // --bucketed and --side-by-side run the trainer's own backend choice on the CPU; on the GPU
  // NCCL's, named, so that it runs at one rank too (auto builds nothing there).
  p.backend = gpu ? "nccl" : o.bucketed || o.side_by_side ? "auto" : o.backend;
  if ((o.bucketed || p.backend == "hierarchical") && p.op != &kAllreduce)
    usage_error("--bucketed and --backend hierarchical run allreduce only");
  if (o.side_by_side && p.op != &kAllreduce) usage_error("--side-by-side runs allreduce only");
  if (gpu) {
    if (o.backend == "hierarchical")
      usage_error(gpu_flag + ": --backend hierarchical reduces host buffers (on the GPU: nccl, or --bucketed)");
    if (o.side_by_side) usage_error(gpu_flag + ": --side-by-side compares host paths (use --device cpu)");
    if (o.overlap) usage_error(gpu_flag + ": --overlap measures a host compute kernel (use --device cpu)");
    if (o.precision != "fp32") usage_error(gpu_flag + ": NCCL reduces fp32 only (--precision fp32)");
#ifdef MLPD_HAVE_NCCL
    if (cuda_device_count() == 0) usage_error(gpu_flag + ": no GPU visible on this machine");
#else
    usage_error(gpu_flag + ": this build has no CUDA/NCCL");
#endif
  }
  p.path = o.bucketed                    ? PathKind::bucketed
           : p.backend == "hierarchical" ? PathKind::communicator
           : p.backend == "nccl"         ? PathKind::nccl
                                         : PathKind::mpi;

  p.cfg.backend = p.backend;
  p.cfg.bucket_mb = o.bucket_mb;
  p.cfg.first_bucket_mb = o.first_bucket_mb;
  p.cfg.precision = o.precision;
  p.cfg.small_kb = o.small_kb;
  p.cfg.chunk_kb = o.chunk_kb;
  p.cfg.ranks_per_node = o.test_ranks_per_node;
  p.cfg.timeout_s = o.comm_timeout;

  p.counts = sweep_counts(min_bytes, max_bytes, o.factor, *p.op, w.size);
  check_fits(o, p, w);
  return p;
}

}  // namespace mlpd::comm_bench
