// ncf figures: the HR@10 / NDCG@10 baselines of the prepared mini (or reference) data (item
// popularity, random scores; same pessimistic tie rule as the metric), then training samples/s
// of the trainer's step at this rank count (run under mpirun at 1 and 2 ranks).
// Usage: bench_ncf [--data-dir data] [--scale mini] [--steps 60] [--warmup 10] [--set key=value]...
//                  [--device cpu|cuda] [--precision fp32|bf16]
// On a GPU a step is timed until its optimizer update has run on the device, not until it is queued.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/collectives.h"
#include "core/fpu.h"
#include "datasets/movielens.h"
#include "core/check.h"
#include "kernels/device.h"
#include "kernels/op_table.h"
#include "train/setup.h"
#include "train/step.h"
#include "workloads/ncf/ncf_metric.h"

using namespace mlpd;

int main(int argc, char** argv) {
  openblas_set_num_threads(1);
  World w = init_world(&argc, &argv);
  enable_flush_denormals();
  std::string data_dir = "data", scale = "mini";
  int steps = 60, warmup = 10;
  std::vector<std::string> sets;
  Device device = Device::cpu;
  Precision precision = Precision::fp32;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--data-dir" && i + 1 < argc) data_dir = argv[++i];
    else if (a == "--scale" && i + 1 < argc) scale = argv[++i];
    else if (a == "--steps" && i + 1 < argc) steps = std::atoi(argv[++i]);
    else if (a == "--warmup" && i + 1 < argc) warmup = std::atoi(argv[++i]);
    else if (a == "--set" && i + 1 < argc) sets.push_back(argv[++i]);
    else if (a == "--device" && i + 1 < argc && (argv[i + 1] == std::string("cpu") || argv[i + 1] == std::string("cuda")))
      device = parse_device(argv[++i]);
    else if (a == "--precision" && i + 1 < argc && (argv[i + 1] == std::string("fp32") || argv[i + 1] == std::string("bf16")))
      precision = parse_compute_precision(argv[++i]);
    else {
      if (w.rank == 0)
        std::fprintf(stderr, "usage: bench_ncf [--data-dir d] [--scale mini] [--steps N] [--warmup N] [--set k=v]... "
                             "[--device cpu|cuda] [--precision fp32|bf16]\n");
      finalize_world(w);
      return 2;
    }
  }
  // The run's own set-up path: the same config resolution and rules as a result.
  ResolvedRun run;
  BuiltRun built;
  try {
    if (w.rank == 0) {
      MovieLensData d = load_movielens(workload_data_path(data_dir, "ncf", scale), scale);
      double nd_pop = 0, nd_rnd = 0;
      const double pop = popularity_hr(d, 10, &nd_pop), rnd = random_hr(d, 10, 1, &nd_rnd);
      std::printf("baselines (%lld users, %d negatives): popularity HR@10 %.4f NDCG@10 %.4f | random HR@10 %.4f NDCG@10 %.4f\n",
                  static_cast<long long>(d.num_users), d.eval_negatives, pop, nd_pop, rnd, nd_rnd);
    }
    run = resolve_run(RunRequest{"ncf", scale, "", sets, data_dir, device, precision}, w.rank, w.size);
    built = build_run(w, run, CommConfig{});
  } catch (const UserError& e) {
    if (w.rank == 0) std::fprintf(stderr, "bench_ncf: error: %s\n", e.what());
    finalize_world(w);
    return e.exit_code;
  }
  Workload* wl = built.workload.get();
  Hyperparams& hp = built.hyper;
  Communicator* comm = built.comm.get();
  const int64_t global_batch = wl->facts.global_batch;
  std::string precision_text = compute_precision_name(precision);
  if (precision == Precision::bf16) precision_text += std::string(" (GEMMs on ") + bf16_gemm_kernel(built.device.device) + ")";
  if (w.rank == 0)
    std::printf("bench_ncf: %d rank(s), global batch %lld, device %s, precision %s, %s\n", w.size,
                static_cast<long long>(global_batch), built.device.description.c_str(), precision_text.c_str(),
                wl->facts.model_summary.c_str());
  std::vector<double> step_s;
  double comm_s = 0, total = 0;
  double samples = 0;
  for (int i = 0; i < warmup + steps; ++i) {
    barrier(w);
    const auto t0 = std::chrono::steady_clock::now();
    StepOutcome o = train_one_step(w, *comm, *wl, hp.optimizer, static_cast<float>(lr_at(hp.schedule, i)), 0,
                                   i % wl->facts.steps_per_epoch);
    synchronize(run.device);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i >= warmup) {
      step_s.push_back(dt);
      total += dt;
      comm_s += o.comm_seconds;
      samples += o.work;
    }
  }
  std::sort(step_s.begin(), step_s.end());
  const double median = step_s[step_s.size() / 2];
  const auto t0 = std::chrono::steady_clock::now();
  const EvalPartial part = wl->evaluate();
  const double eval_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  (void)part;
  if (w.rank == 0)
    std::printf("ranks %d | %d steps | median step %.1f ms | %.0f samples/s (median) | %.0f samples/s (mean) | comm %.1f%% | eval (rank 0's users) %.2f s\n",
                w.size, steps, 1000 * median, static_cast<double>(global_batch) / median,
                samples / total, 100 * comm_s / total, eval_s);
  finalize_world(w);
  return 0;
}
