// Training throughput of a workload at the current rank count (run it under mpirun at 1 and 2
// ranks; bench/run_train_bench does both and prints the scaling efficiency). It times exactly
// the trainer's step (train_one_step) after a warm-up, one compute thread per rank.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/collectives.h"
#include "core/fpu.h"
#include "mlperf/config.h"
#include "train/hyperparams.h"
#include "train/step.h"
#include "workloads/workload.h"

using namespace mlpd;

int main(int argc, char** argv) {
  openblas_set_num_threads(1);
  World w = init_world(&argc, &argv);
  enable_flush_denormals();
  std::string benchmark = "resnet", data_dir = "data";
  int steps = 30, warmup = 5;
  std::vector<std::string> sets;
  CommConfig comm_cfg;
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
    else {
      if (w.rank == 0) std::fprintf(stderr, "usage: bench_train [--benchmark resnet] [--data-dir data] [--steps 30] [--warmup 5] [--set key=value]... [--bucket-mb MB] [--comm-backend B] [--no-overlap]\n");
      finalize_world(w);
      return 2;
    }
  }
  nlohmann::json cfg = resolve_config(workload_defaults_yaml(benchmark, "mini"), "", sets);
  auto wl = make_workload(benchmark, "mini", cfg, WorkloadContext{w.rank, w.size, data_dir});
  wl->init_parameters(1);
  broadcast_parameters(w, wl->store);
  Hyperparams hp = make_hyperparams(cfg, wl->batches_per_epoch);
  init_optimizer(hp.optimizer, wl->store);
  std::unique_ptr<Communicator> comm = make_communicator(w, comm_cfg, wl->store);
  connect_gradients(*wl, *comm, nullptr);
  if (w.rank == 0)
    std::printf("bench_train: %s mini, %d rank(s), global batch %lld, openblas core %s, FTZ/DAZ %s\nmodel: %s\ncommunication: %s\n",
                benchmark.c_str(), w.size, static_cast<long long>(wl->global_batch), openblas_get_corename(),
                denormals_flushed() ? "on" : "off", wl->model_summary.c_str(), describe(*comm).c_str());
  std::vector<double> step_s;
  double comm_s = 0;
  int64_t samples = 0;
  for (int i = 0; i < warmup + steps; ++i) {
    barrier(w);
    auto t0 = std::chrono::steady_clock::now();
    StepOutcome o = train_one_step(w, *comm, *wl, hp.optimizer, 0.01f, 0, i % wl->batches_per_epoch);
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i >= warmup) {
      step_s.push_back(dt);
      comm_s += o.comm_seconds;
      samples += o.samples;
    }
  }
  double total = 0;
  for (double s : step_s) total += s;
  std::sort(step_s.begin(), step_s.end());
  double median = step_s[step_s.size() / 2];
  if (w.rank == 0)
    std::printf("ranks %d | %d steps | median step %.1f ms | %.0f samples/s (median) | %.0f samples/s (mean) | comm %.1f%% | %.1f GFLOP/s per rank\n",
                w.size, steps, 1000 * median, static_cast<double>(wl->global_batch) / median,
                static_cast<double>(samples) / total, 100 * comm_s / total,
                wl->flops_per_sample * static_cast<double>(wl->global_batch) / median / w.size / 1e9);
  finalize_world(w);
  return 0;
}
