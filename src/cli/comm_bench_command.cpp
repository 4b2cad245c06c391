// mlperf-dist comm-bench: the command line of the collective benchmark in comm/bench/ (harness.h):
// its options registered onto comm_bench::Options, then one call. The options' values are
// checked by the harness, so every bad value is a usage error (exit 2) on every rank alike.
#include <cblas.h>

#include <cstdio>

#include "cli/commands.h"
#include "comm/world.h"
#include "core/check.h"

namespace mlpd::cli {

void add_comm_bench_command(CLI::App& app, CommBenchArgs& a) {
  auto* c = app.add_subcommand(
      "comm-bench",
      "Collective bandwidth, nccl-tests style (run under mpirun): per size the time, algbw, busbw and #wrong\n"
      "(the result checked against its exactly-known value). Also measures one core's memory copy bandwidth,\n"
      "the bound for host collectives on one node.\n"
      "  mpirun -np 2 mlperf-dist comm-bench -b 8 -e 256M -f 2                # plain MPI_Allreduce\n"
      "  mpirun -np 2 mlperf-dist comm-bench -b 1M -e 256M --bucketed         # what the trainer runs\n"
      "  mpirun -np 2 mlperf-dist comm-bench -b 1M -e 64M --bucketed --overlap\n"
      "  mpirun -np 2 mlperf-dist comm-bench -b 8 -e 1G --device cuda          # NCCL on GPU buffers\n"
      "  mpirun -np 2 mlperf-dist comm-bench -b 1M -e 1G --device cuda --bucketed  # the trainer on the GPU");
  c->add_option("-b,--minbytes", a.min_bytes, "Smallest size in bytes (K, M, G suffixes: powers of 1024)")
      ->capture_default_str();
  c->add_option("-e,--maxbytes", a.max_bytes, "Largest size in bytes (K, M, G suffixes)")->capture_default_str();
  c->add_option("-f,--stepfactor", a.factor, "Multiply the size by this factor between sizes (> 1)")
      ->capture_default_str();
  c->add_option("-n,--iters", a.iters, "Timed iterations per size (1 to 1000000)")->capture_default_str();
  c->add_option("-w,--warmup_iters", a.warmup, "Untimed warm-up iterations per size (0 to 1000000)")
      ->capture_default_str();
  c->add_option("--op", a.op, "Collective: allreduce, broadcast, reduce_scatter or allgather")->capture_default_str();
  c->add_option(
       "--backend", a.backend,
       "mpi: one plain MPI collective of the whole buffer (the baseline); hierarchical: the communicator's "
       "shared-memory node step + per-rank rails across nodes; nccl: the same as --device cuda")
      ->capture_default_str();
  c->add_option("--device", a.device,
                "Where the buffers are: cpu, or cuda (one GPU per rank: local rank % GPUs). cuda runs the plain "
                "collective through NCCL on device buffers, and with --bucketed the trainer's step over a "
                "parameter store on the GPU (device buckets reduced by NCCL); fp32 only, no --overlap or "
                "--side-by-side. A usage error (exit 2) where no GPU is visible or the build has no CUDA")
      ->capture_default_str();
  c->add_flag("--bucketed", a.bucketed,
              "Run exactly what the trainer runs: the buffer cut into 256 KiB views, its buckets (--bucket-mb), "
              "grad_ready in reverse order, and its automatic backend choice (overrides --backend; allreduce only)");
  c->add_option("--precision", a.precision, "Wire precision of the communicator paths: fp32, bf16 or fp16")
      ->capture_default_str();
  c->add_option("--bucket-mb", a.bucket_mb, "Bucket cap in MB for --bucketed (0: the measured default)")
      ->capture_default_str();
  c->add_option("--first-bucket-mb", a.first_bucket_mb, "Cap of the first bucket in MB (0: the default)")
      ->capture_default_str();
  c->add_option("--small-kb", a.small_kb, "auto backend: buckets below this many KiB go to mpi (0: default)")
      ->capture_default_str();
  c->add_option("--chunk-kb", a.chunk_kb, "hierarchical: pipeline chunk in KiB (0: default)")->capture_default_str();
  c->add_option("--comm-timeout", a.comm_timeout,
                "Seconds before a collective that has not completed ends the job, naming the missing ranks")
      ->capture_default_str();
  c->add_flag("--overlap", a.overlap,
              "Also measure overlap (OSU style): the collective started, a compute kernel run with progress calls "
              "between 32 slices (per view with --bucketed), then waited for; overlap % = 100 * (1 - (t_total - "
              "t_compute) / t_comm), clipped to 0..100 (allreduce only)");
  c->add_option("--compute-us", a.compute_us,
                "Overlap mode: compute kernel length in microseconds per iteration (0: the size's measured comm time)")
      ->capture_default_str();
  c->add_flag("--side-by-side", a.side_by_side,
              "allreduce: time plain MPI_Allreduce and the trainer's bucketed path in the same run, alternating "
              "iterations (fair on a noisy machine); prints both busbw columns and their ratio");
  c->add_option("--json", a.json, "Also write the results as JSON to this file (rank 0)");
  c->add_option("--test-ranks-per-node", a.test_ranks_per_node,
                "Test hook: the communicator paths treat each N consecutive ranks as one node (the cost of the "
                "reduction across nodes, measured on one machine)")
      ->group("");
  c->add_option("--test-hang-rank", a.test_hang_rank,
                "Test hook: this rank skips a collective (a bucketed step with --bucketed, else a blocking allreduce)")
      ->group("");
}

int run_comm_bench_command(CommBenchArgs& a, int argc, char** argv) {
  // The process links OpenBLAS (through the trainer's libraries): no BLAS threads beside the ranks.
  openblas_set_num_threads(1);
  World w = init_world(&argc, &argv);
  // A bad option is the same on every rank: say it once and exit cleanly, before any collective.
  try {
    comm_bench::check_options(a, w);
  } catch (const UserError& e) {
    if (w.rank == 0) std::fprintf(stderr, "mlperf-dist: error: %s\n", e.what());
    finalize_world(w);
    return e.exit_code;
  }
  const comm_bench::Report report = comm_bench::run_comm_bench(w, a);
  finalize_world(w);
  return report.total_wrong ? kExitInternal : kExitSuccess;  // a wrong result is a failure, never a figure
}

}  // namespace mlpd::cli
