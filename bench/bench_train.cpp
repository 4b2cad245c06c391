// Training throughput of a workload at the current rank count (run it under mpirun at 1 and 2
// ranks; bench/run_train_bench does both and prints the scaling efficiency). It times exactly
// the trainer's step (train_one_step) after a warm-up, one compute thread per rank.
// --compare-overlap: two communicators (overlap on / off) take turns step by step in one run, so
// a machine whose speed drifts (other jobs, clocks) hurts both alike; prints both medians and the
// median of the paired differences (on - off) with a sign count.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/collectives.h"
#include "comm/gather_strings.h"
#include "core/fpu.h"
#include "core/check.h"
#include "kernels/op_table.h"
#include "train/setup.h"
#include "train/step.h"

using namespace mlpd;

// The CUDA emulator (kernels/emulate) counts the host's waits for the device; a real GPU build has
// no such function, and the bench then prints no count.
extern "C" long mlpd_emulate_host_waits() __attribute__((weak));

int main(int argc, char** argv) {
  openblas_set_num_threads(1);
  World w = init_world(&argc, &argv);
  enable_flush_denormals();
  std::string benchmark = "resnet", data_dir = "data";
  int steps = 30, warmup = 5;
  std::vector<std::string> sets;
  CommConfig comm_cfg;
  bool compare_overlap = false;
  Device device = Device::cpu;
  Precision precision = Precision::fp32;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--benchmark" && i + 1 < argc) benchmark = argv[++i];
    else if (a == "--data-dir" && i + 1 < argc) data_dir = argv[++i];
    else if (a == "--steps" && i + 1 < argc) steps = std::atoi(argv[++i]);
    else if (a == "--warmup" && i + 1 < argc) warmup = std::atoi(argv[++i]);
    else if (a == "--set" && i + 1 < argc) sets.push_back(argv[++i]);
    else if (a == "--bucket-mb" && i + 1 < argc) comm_cfg.bucket_mb = std::atof(argv[++i]);
    else if (a == "--comm-backend" && i + 1 < argc) comm_cfg.backend = argv[++i];
    else if (a == "--no-overlap") comm_cfg.overlap = false;
    else if (a == "--compare-overlap") compare_overlap = true;
    else if (a == "--device" && i + 1 < argc && (argv[i + 1] == std::string("cpu") || argv[i + 1] == std::string("cuda")))
      device = parse_device(argv[++i]);
    else if (a == "--precision" && i + 1 < argc && (argv[i + 1] == std::string("fp32") || argv[i + 1] == std::string("bf16")))
      precision = parse_compute_precision(argv[++i]);
    else {
      if (w.rank == 0) std::fprintf(stderr, "usage: bench_train [--benchmark resnet] [--data-dir data] [--steps 30] [--warmup 5] [--set key=value]... [--bucket-mb MB] [--comm-backend B] [--no-overlap | --compare-overlap] [--device cpu|cuda] [--precision fp32|bf16]\n");
      finalize_world(w);
      return 2;
    }
  }
  // The run's own set-up path: the same config resolution and rules as a result.
  if (compare_overlap) comm_cfg.overlap = true;
  ResolvedRun run;
  BuiltRun built;
  try {
    run = resolve_run(RunRequest{benchmark, "mini", "", sets, data_dir, device, precision}, w.rank, w.size);
    built = build_run(w, run, comm_cfg);
  } catch (const UserError& e) {
    if (w.rank == 0) std::fprintf(stderr, "bench_train: error: %s\n", e.what());
    finalize_world(w);
    return e.exit_code;
  }
  Workload* wl = built.workload.get();
  if (wl->has_own_driver()) {
    if (w.rank == 0)
      std::fprintf(stderr, "bench_train: error: %s drives its own loop (self-play, then training steps): time it with "
                   "`mlperf-dist train`\n", benchmark.c_str());
    finalize_world(w);
    return 2;
  }
  Hyperparams& hp = built.hyper;
  std::unique_ptr<Communicator>& comm = built.comm;
  std::unique_ptr<Communicator> comm_off;
  if (compare_overlap) {
    CommConfig off = comm_cfg;
    off.overlap = false;
    comm_off = make_communicator(w, off, wl->store);
  }
  const int64_t global_batch = wl->facts.global_batch;
  std::string precision_text = compute_precision_name(precision);
  if (precision == Precision::bf16)
    precision_text += std::string(" (GEMMs on ") + bf16_gemm_kernel(built.device.device) + ", convolutions on " +
                      bf16_conv_kernel(built.device.device) + ")";
  if (w.rank == 0)
    std::printf("bench_train: %s mini, %d rank(s), global batch %lld, device %s, precision %s, openblas core %s, FTZ/DAZ %s\nmodel: %s\ncommunication: %s\n",
                benchmark.c_str(), w.size, static_cast<long long>(global_batch), built.device.description.c_str(),
                precision_text.c_str(),
                openblas_get_corename(), denormals_flushed() ? "on" : "off", wl->facts.model_summary.c_str(),
                describe(*comm).c_str());
  if (w.rank == 0 && wl->facts.activation_bytes > 0)  // workloads without an arena keep scratch in their buffers
    std::printf("memory per rank: activation buffers %.1f MB, scratch arena %.1f MB\n",
                double(wl->facts.activation_bytes) / 1e6, double(wl->facts.scratch_bytes) / 1e6);
  // Step k uses communicator k % 2 when comparing (0: overlap on, 1: off).
  std::vector<double> step_s[2];
  double comm_s[2] = {0, 0}, total_s[2] = {0, 0};
  double samples[2] = {0, 0};
  long host_waits[2] = {0, 0};
  const int runs = compare_overlap ? 2 : 1;
  for (int i = 0; i < runs * (warmup + steps); ++i) {
    const int k = compare_overlap ? i % 2 : 0;
    Communicator& c = k == 0 ? *comm : *comm_off;
    barrier(w);
    auto t0 = std::chrono::steady_clock::now();
    const long waits_before = mlpd_emulate_host_waits ? mlpd_emulate_host_waits() : 0;
    StepOutcome o = train_one_step(w, c, *wl, hp.optimizer, 0.01f, 0, (i / runs) % wl->facts.steps_per_epoch);
    const long step_waits = mlpd_emulate_host_waits ? mlpd_emulate_host_waits() - waits_before : 0;
    synchronize(run.device);  // a GPU step ends when its optimizer update has run, not when it is queued
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The step's time is its slowest rank's (what the next barrier waits for).
    dt = allreduce_max(w, dt);
    if (i / runs >= warmup) {
      step_s[k].push_back(dt);
      comm_s[k] += o.comm_seconds;
      total_s[k] += dt;
      samples[k] += o.work;
      host_waits[k] += step_waits;
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  };
  for (int k = 0; k < runs; ++k) {
    const double med = median(step_s[k]);
    if (w.rank == 0)
      std::printf("%sranks %d | %d steps | median step %.1f ms | %.0f samples/s (median) | %.0f samples/s (mean) | comm %.1f%% | %.1f GFLOP/s per rank\n",
                  compare_overlap ? (k == 0 ? "overlap on:  " : "overlap off: ") : "", w.size, steps, 1000 * med,
                  static_cast<double>(global_batch) / med, samples[k] / total_s[k],
                  100 * comm_s[k] / total_s[k], wl->facts.flops_per_sample * static_cast<double>(global_batch) / med / w.size / 1e9);
    // Each is a point where the GPU drains: the host waits for a value, then queues the next work.
    if (w.rank == 0 && mlpd_emulate_host_waits)
      std::printf("%shost waits per step (rank 0, counted by the CUDA emulator): %.2f\n",
                  compare_overlap ? (k == 0 ? "overlap on:  " : "overlap off: ") : "",
                  double(host_waits[k]) / std::max(1, steps));
  }
  {
    // Per rank: a rank that always waits in the allreduce points at systematic skew (another rank
    // slower), not at the communication itself.
    char mine[96];
    std::snprintf(mine, sizeof mine, "r%d %.2f ms", w.rank, 1000 * (comm_s[0] + comm_s[1]) / (runs * steps));
    std::vector<std::string> all = gather_strings(w, mine);
    if (w.rank == 0) {
      std::string line;
      for (const std::string& x : all) line += (line.empty() ? "" : ", ") + x;
      std::printf("mean wait in the gradient allreduce per step, by rank: %s\n", line.c_str());
    }
  }
  if (compare_overlap && w.rank == 0) {
    std::vector<double> diff;
    int on_faster = 0;
    for (size_t i = 0; i < step_s[0].size(); ++i) {
      diff.push_back(step_s[0][i] - step_s[1][i]);
      on_faster += step_s[0][i] < step_s[1][i];
    }
    std::printf("overlap on - off, paired by step: median %+.2f ms (%+.2f%% of the off step), on faster in %d of %zu pairs; mean comm wait on %.2f ms, off %.2f ms\n",
                1000 * median(diff), 100 * median(diff) / median(step_s[1]), on_faster, diff.size(),
                1000 * comm_s[0] / steps, 1000 * comm_s[1] / steps);
  }
  comm_off.reset();  // the communicators (NCCL's, the MPI backend's) before MPI goes
  built.comm.reset();
  finalize_world(w);
  return 0;
}
