// comm-bench, the collective benchmark in the manner of nccl-tests: for each size from min to max
// bytes (times factor), warm-up runs, then timed runs, each iteration timed alone; then the result
// is checked against its exactly-known value (#wrong). A fast wrong answer is reported as wrong.
//
// Figures: time = median over iterations of the slowest rank's time; algbw = bytes / time;
// busbw = algbw * the collective's bus factor (allreduce 2(n-1)/n, reduce_scatter and allgather
// (n-1)/n, broadcast 1), so it compares with the link's (here: memory's) bandwidth whatever n is.
// Rank 0 prints a table (and JSON beside it on request); every rank gets the same Report.
//
// Files: harness.{h,cpp} the modes and their timing loops, plan.{h,cpp} the options checked and
// resolved, report.{h,cpp} the table and the JSON, path.{h,cpp} the paths a collective runs on,
// timing.{h,cpp} copy bandwidth and the overlap compute kernel, collective.h and one file per
// collective.
#pragma once
#include <string>
#include <vector>

#include "comm/world.h"

namespace mlpd::comm_bench {

// The command line's options, as the CLI parses them (src/cli/comm_bench_command.cpp).
struct Options {
  std::string min_bytes = "8";     // -b; K, M, G suffixes: powers of 1024
  std::string max_bytes = "256M";  // -e
  double factor = 2;               // -f: > 1
  int iters = 20;                  // -n: timed iterations per size, 1 to 1000000
  int warmup = 5;                  // -w: untimed iterations per size, 0 to 1000000
  std::string op = "allreduce";    // allreduce | broadcast | reduce_scatter | allgather
  std::string backend = "mpi";     // mpi | hierarchical | nccl (= --device cuda)
  bool bucketed = false;           // the trainer's bucketed step (its automatic backend; allreduce only)
  // Where the buffers are: cpu | cuda. cuda: the plain collective through NCCL on device buffers,
  // or with --bucketed the trainer's step over a ParamStore on the GPU (device buckets, NCCL). A
  // usage error where the build has no CUDA or no GPU is visible.
  std::string device = "cpu";
  std::string precision = "fp32";  // wire precision of the communicator paths: fp32 | bf16 | fp16
  double bucket_mb = 0;            // communicator settings (0: the measured defaults, comm/communicator.h)
  double first_bucket_mb = 0;
  double small_kb = 0;
  double chunk_kb = 0;
  double comm_timeout = 600;  // seconds before the watchdog ends a hung collective
  bool overlap = false;       // also measure overlap with a compute kernel (allreduce only)
  double compute_us = 0;      // overlap: compute kernel length per iteration (0: the measured comm time)
  std::string json;           // also write the results as JSON to this file (rank 0)
  bool side_by_side = false;  // allreduce: plain MPI_Allreduce and the trainer's path, alternating iterations
  // Test hooks.
  int test_hang_rank = -1;        // this rank skips a collective (watchdog test); no benchmark runs
  int test_ranks_per_node = 0;    // the communicator paths pretend nodes of this many consecutive ranks
  bool corrupt_for_test = false;  // rank 0 alters one result element before each check: #wrong > 0
};

// One size. With side by side, time and bandwidths are the trainer's path, plain_* MPI_Allreduce.
struct SizeResult {
  size_t bytes = 0, count = 0;                              // count: floats in the op's larger buffer
  double time_us = 0, algbw = 0, busbw = 0;                 // algbw, busbw in GB/s
  long long wrong = 0;                                      // over all ranks (and the overlap runs' check)
  double time_mean_us = 0;                                  // mean over iterations of the slowest rank
  double t_cpu_us = -1, t_total_us = -1, overlap_pct = -1;  // overlap mode (else -1)
  double plain_time_us = -1, plain_busbw = -1;              // side by side (else -1)
};

struct Report {
  double copy_gbps = 0;  // rank 0's single-core memcpy bandwidth
  std::vector<SizeResult> sizes;
  long long total_wrong = 0;
};

// Runs the benchmark on w (MPI initialised; collective over w). Every option is checked first,
// on every rank alike and before any collective or allocation: a bad one throws
// UserError(message, 2). --device cuda opens the process's GPU (local_rank % GPUs) and leaves it
// open, as the trainer would. With test_hang_rank >= 0 it runs the watchdog test instead: the other
// ranks are ended by the watchdog, the hanging rank sleeps.
Report run_comm_bench(World& w, const Options& o);
// The same checks alone (no MPI call), for a caller that reports a usage error before running.
void check_options(const Options& o, const World& w);

}  // namespace mlpd::comm_bench
