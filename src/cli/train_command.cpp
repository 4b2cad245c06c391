#include <cblas.h>
#include <unistd.h>

#include <cstdio>
#include <functional>

#include "cli/commands.h"
#include "comm/collectives.h"
#include "comm/world.h"
#include "core/check.h"
#include "core/log.h"
#include "core/output_paths.h"
#include "kernels/device.h"
#include "train/stop_signal.h"
#include "mlperf/config.h"
#include "workloads/registry.h"

namespace mlpd::cli {

int agree_on_setup(World& w, const std::function<void()>& setup) {
  int failed_code = 0;
  std::string failure;
  try {
    setup();
  } catch (const UserError& e) {
    failed_code = e.exit_code;
    failure = e.what();
  } catch (const std::exception& e) {
    failed_code = kExitInternal;
    failure = std::string("internal error: ") + e.what();
  }
  const double worst = allreduce_max(w, failed_code);
  if (worst > 0) {
    const double first_failing = -allreduce_max(w, failed_code ? -w.rank : -w.size);
    if (failed_code && w.rank == static_cast<int>(first_failing))
      std::fprintf(stderr, "mlperf-dist: error%s: %s\n",
                   w.rank == 0 ? "" : (" on rank " + std::to_string(w.rank)).c_str(), failure.c_str());
  }
  return static_cast<int>(worst);
}

int train_agreed(World& w, const ResolvedRun& run, const TrainOptions& opts, TrainResult& r) {
  try {
    r = run_training(w, run, opts);
    return r.success ? kExitSuccess : kExitAborted;
  } catch (const UserError& e) {
    // Other ranks may be waiting in a collective: end the whole job, never hang.
    if (w.size > 1) abort_world(w, e.what(), e.exit_code);
    std::fprintf(stderr, "mlperf-dist: error: %s\n", e.what());
    return e.exit_code;
  } catch (const std::exception& e) {
    if (w.size > 1) abort_world(w, e.what(), kExitInternal);
    std::fprintf(stderr, "mlperf-dist: internal error: %s\n", e.what());
    return kExitInternal;
  }
}

std::string default_system_name() {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) return "local";
  std::string h(host);
  return h.substr(0, h.find('.'));
}

void add_compute_options(CLI::App* c, std::string& device, std::string& precision) {
  c->add_option("--device", device,
                "cpu, or cuda: one GPU per rank (local rank modulo the node's GPUs); parameters, gradients, "
                "optimizer state and activations on it, gradients reduced by NCCL")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  c->add_option("--precision", precision,
                "fp32, or bf16: GEMMs and convolutions take bf16 operands and accumulate in fp32, the activations "
                "and activation gradients they write are rounded to bf16; fp32 master weights, optimizer state "
                "and weight gradients. GEMMs run on bf16 hardware (CUDA tensor cores; AVX512-BF16 on a CPU "
                "built with it), convolutions on CUDA's TF32 tensor cores or the CPU's fp32 kernels; storage "
                "between ops stays fp32")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
}

void add_train_command(CLI::App& app, TrainArgs& a) {
  auto* c = app.add_subcommand("train", "Train one workload to its quality target (run under mpirun for N ranks)");
  auto& o = a.opts;
  o.system = default_system_name();
  c->footer(kExitCodesHelp);
  c->add_option("--benchmark,-b", o.run.benchmark, "Workload to train: " + workload_list_text())
      ->check(CLI::IsMember(workload_names()))
      ->capture_default_str();
  c->add_option("--scale,-s", o.run.scale, "mini (small real data, CPU minutes) or reference (MLPerf's model and data)")
      ->check(CLI::IsMember({"mini", "reference"}))
      ->capture_default_str();
  c->add_option("--config,-c", o.run.config_file,
                "YAML file of hyperparameters merged over the workload's defaults (MLPerf key names; unknown keys are errors)")
      ->check(CLI::ExistingFile);
  c->add_option("--set", o.run.sets, "Override one config key: --set key=value (repeatable)");
  add_compute_options(c, a.device, a.precision);
  c->add_option("--data-dir", o.run.data_dir, "Directory of prepared datasets (see `mlperf-dist prepare`)")->capture_default_str();
  c->add_option("--results-dir", o.results_dir, "Result logs go to <results-dir>/<system>/<benchmark>/result_N.txt")
      ->capture_default_str();
  c->add_option("--system", o.system, "System name used in the results path")->capture_default_str();
  c->add_option("--progress-seconds", o.progress_seconds, "At most one step line per this many seconds")
      ->capture_default_str();
  c->add_option("--bucket-mb", o.comm.bucket_mb,
                "Gradient bucket cap in MiB (0: the measured default, 4 on CPU, 25 on GPU); the first bucket is smaller")
      ->capture_default_str();
  c->add_option("--comm-backend", o.comm.backend,
                "Gradient allreduce backend: auto (measured choice), mpi, hierarchical (shared memory in a node), nccl")
      ->check(CLI::IsMember({"auto", "mpi", "hierarchical", "nccl"}))
      ->capture_default_str();
  c->add_option("--grad-precision", o.comm.precision, "Gradients on the wire: fp32, or bf16/fp16 compression")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
  c->add_option("--sparse-embeddings", o.comm.sparse_embeddings,
                "Embedding-table gradients (ncf): auto (exchange only the rows a step touched when that is fewer "
                "bytes than the tables, decided per step), on (always by rows), off (dense, whole tables). Host "
                "gradients only; bit for bit the same parameters either way")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  c->add_flag("--no-overlap", a.no_overlap, "Start every bucket's allreduce only after the whole backward");
  c->add_option("--comm-timeout", o.comm.timeout_s,
                "Seconds a collective may take before the watchdog aborts the job naming the missing ranks")
      ->capture_default_str();
  c->add_option("--checkpoint-dir", o.checkpoint_dir,
                "Write checkpoints here: every --checkpoint-every epochs, and when the run stops early (SIGUSR1 or "
                "SIGTERM to the ranks, as `sbatch --signal` and mpirun forward them, or --max-steps)");
  c->add_option("--checkpoint-every", o.checkpoint_every, "Epochs between checkpoints (0: only on an early stop)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  c->add_option("--resume", o.resume_dir,
                "Continue from the latest checkpoint in this directory (same config and rank count; the run is "
                "logged as resumed and is not a valid MLPerf result)")
      ->check(CLI::ExistingDirectory);
  c->add_option("--trace", o.trace_path, "Write a Chrome trace JSON (per-view backward, bucket allreduces) to this file");
  c->add_option("--trace-steps", o.trace_steps, "Steps recorded in the trace (from the first)")->capture_default_str();
  c->add_option("--step-stats", o.step_stats,
                "Write where step time went (compute, exposed communication, skew, update; means over ranks and "
                "steps after warm-up) as JSON to this file: what `mlperf-dist scale` reads");
  c->add_flag("--mllog-stdout", o.mllog_stdout,
              "Also echo every MLLOG line to stdout (as MLPerf's reference scripts print them, for log collectors)");
  c->add_flag("--print-config", a.print_config, "Print the resolved config (after rules) and exit");
  c->add_option("--max-steps", o.max_steps, "Test/study hook: stop after N steps (status aborted, not a result)");
  c->add_option("--test-target", o.test_target,
                "Test hook: replace the quality target; the log is marked division open (never a closed result)");
  c->add_option("--test-ranks-per-node", o.comm.ranks_per_node,
                "Test hook: the communicator treats each N consecutive ranks as one node (one machine reproduces "
                "a multi-node reduction order)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--test-fail-at", o.test_fail_at,
                "Test hook: RANK:STEP - that rank raises an error in that step (how the job ends on one rank's error)");
  c->add_option("--dump-params", o.dump_params, "Write rank 0's final parameters (raw float32) to this file");
  c->add_option("--loss-log", o.loss_log, "Write every step's global loss (hex float, exact) to this file");
}

int run_train_command(TrainArgs& a, const GlobalArgs& g, int argc, char** argv) {
  a.opts.comm.overlap = !a.no_overlap;
  a.opts.run.device = parse_device(a.device);
  a.opts.run.precision = parse_compute_precision(a.precision);
  // One compute thread per rank: ranks are the unit of parallelism.
  openblas_set_num_threads(1);
  World w = init_world(&argc, &argv);
  install_stop_signal_handlers();
  // Before anything is opened or written: the config, the rules (with this run's rank count), the
  // typed hyperparameters and the data files.
  ResolvedRun run;
  const int failed = agree_on_setup(w, [&] {
    init_logging(w.rank, g.log_level);
    check_path_component("--system", a.opts.system);
    check_aux_outputs({{"--loss-log", a.opts.loss_log}, {"--dump-params", a.opts.dump_params}, {"--trace", a.opts.trace_path},
                       {"--step-stats", a.opts.step_stats}});
    run = resolve_run(a.opts.run, w.rank, w.size);
  });
  if (failed) {
    finalize_world(w);
    return failed;
  }
  if (a.print_config) {
    if (w.rank == 0) std::printf("%s", format_config(run.config).c_str());
    finalize_world(w);
    return kExitSuccess;
  }
  TrainResult r;
  const int code = train_agreed(w, run, a.opts, r);
  finalize_world(w);
  return code;
}

}  // namespace mlpd::cli
