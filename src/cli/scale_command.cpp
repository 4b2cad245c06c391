// `mlperf-dist scale`: a strong or weak scaling study on the engines themselves. Per rank count it
// launches `train --step-stats` (and, above one rank, `comm-bench` over the gradient's sizes),
// then reads where step time went, fits the scaling model of src/scaling/ and prints, per point,
// throughput, efficiency, the compute / communication / skew split and the model's error.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "cli/commands.h"
#include "cli/rank_launcher.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "core/read_file.h"
#include "mlperf/keys.h"
#include "scaling/profile_json.h"
#include "scaling/step_model.h"
#include "workloads/registry.h"

namespace mlpd::cli {

namespace fs = std::filesystem;
using scaling::CommSample;
using scaling::MeasuredStep;

void add_scale_command(CLI::App& app, ScaleArgs& a) {
  auto* c = app.add_subcommand(
      "scale",
      "Scaling study: trains BENCHMARK for --steps steps at each rank count (launched with mpirun, or srun\n"
      "inside a Slurm allocation), measures allreduce times with comm-bench at each count, and prints per\n"
      "rank count the throughput, the scaling efficiency, the step split into compute / exposed\n"
      "communication / skew (waiting for the slowest rank) / update, and the scaling model's predicted step\n"
      "time with its error. Writes scale.json (read by `plan --profile` and `report`) and scale.csv.\n"
      "Run it without mpirun: it starts the ranks itself.\n"
      "  mlperf-dist scale --benchmark ncf --ranks 1,2,4 --weak\n"
      "  mlperf-dist scale --benchmark resnet --ranks 1,2 --strong --steps 20 -o scale-resnet\n"
      "  mlperf-dist scale --benchmark ncf --ranks 1,2 --to-target    # time to train at each count too\n"
      "  mlperf-dist scale --benchmark ncf --ranks 2,4,8 --launcher \"mpirun --hostfile hosts -np {n}\"");
  c->add_option("--benchmark,-b", a.benchmark, "Workload: " + workload_list_text())
      ->check(CLI::IsMember(workload_names()))
      ->capture_default_str();
  c->add_option("--scale,-s", a.scale, "mini or reference")->check(CLI::IsMember({"mini", "reference"}))->capture_default_str();
  c->add_option("--ranks", a.ranks, "Comma-separated rank counts, ascending (each >= 1)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  auto* weak = c->add_flag("--weak", a.weak,
                           "Weak scaling (the default): the per-rank batch is fixed, so the global batch grows with "
                           "the ranks; by default the configured global batch divided by the largest rank count");
  auto* strong = c->add_flag("--strong", a.strong, "Strong scaling: the configured global batch at every rank count");
  weak->excludes(strong);
  c->add_option("--per-rank-batch", a.per_rank_batch, "Weak scaling: this per-rank batch instead of the default")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  c->add_option("--steps", a.steps, "Training steps measured per rank count (the first few are warm-up, left out)")
      ->check(CLI::Range(int64_t{3}, int64_t{1} << 40))
      ->capture_default_str();
  c->add_flag("--to-target", a.to_target,
              "Train to the quality target at every rank count instead of --steps steps; time to train is reported");
  c->add_option("--data-dir", a.data_dir, "Directory of prepared datasets (see `mlperf-dist prepare`)")->capture_default_str();
  c->add_option("--output-dir,-o", a.output_dir,
                "Where scale.json, scale.csv and each rank count's logs go (must not hold a scale.json already)")
      ->capture_default_str();
  c->add_option("--launcher", a.launcher,
                "Command that starts {n} ranks, split on spaces, e.g. \"mpirun --hostfile hosts -np {n}\" (default: "
                "srun --mpi=pmix -n {n} inside a Slurm allocation, else mpirun on this host)");
  c->add_option("--set", a.sets, "Override one config key of every run: --set key=value (repeatable)");
  add_compute_options(c, a.device, a.precision);
  c->add_option("--cores-per-node", a.cores_per_node,
                "Cores per node for the model's contention term (0: this machine's count)")
      ->check(CLI::Range(0, 1 << 16))
      ->capture_default_str();
  c->add_flag("--no-comm-bench", a.no_comm_bench,
              "Skip comm-bench: the allreduce cost is then fitted from the training steps' bucket spans");
}

namespace {

struct PointPlan {
  int ranks = 1;
  int64_t global_batch = 0;
  std::string dir;
};

nlohmann::json read_json(const std::string& path) {
  try {
    return nlohmann::json::parse(read_whole_file(path, "scale output", 1));
  } catch (const nlohmann::json::exception& e) {
    throw UserError(path + ": not valid JSON (" + e.what() + ")", 1);
  }
}

// What `train` would be asked, with the user's --set and any extra settings after them.
RunRequest run_request(const ScaleArgs& a, const std::vector<std::string>& extra_sets = {}) {
  RunRequest req;
  req.benchmark = a.benchmark;
  req.scale = a.scale;
  req.sets = a.sets;
  req.sets.insert(req.sets.end(), extra_sets.begin(), extra_sets.end());
  req.data_dir = a.data_dir;
  req.device = parse_device(a.device);
  req.precision = parse_compute_precision(a.precision);
  return req;
}

std::vector<PointPlan> plan_points(const ScaleArgs& a, bool weak) {
  std::vector<int> ranks = a.ranks;
  if (ranks.empty()) throw UserError("--ranks: give at least one rank count", 2);
  for (size_t i = 1; i < ranks.size(); ++i)
    if (ranks[i] <= ranks[i - 1]) throw UserError("--ranks must be strictly ascending (e.g. 1,2,4)", 2);
  for (const std::string& s : a.sets)
    if (s.rfind(std::string(keys::kGlobalBatchSize) + "=", 0) == 0)
      throw UserError("--set global_batch_size: scale chooses the batch (use --strong, or --weak with "
                      "--per-rank-batch)", 2);
  const int64_t configured = resolve_run(run_request(a), 0, 1).run.global_batch;
  const int64_t per_rank = a.per_rank_batch > 0 ? a.per_rank_batch : configured / ranks.back();
  if (weak && per_rank < 1)
    throw UserError(fmt::format("the configured global batch {} is smaller than {} ranks", configured, ranks.back()), 2);
  std::vector<PointPlan> points;
  for (int n : ranks) {
    PointPlan p;
    p.ranks = n;
    p.global_batch = weak ? per_rank * n : configured;
    p.dir = (fs::path(a.output_dir) / fmt::format("ranks_{}", n)).string();
    // The rules (batch divisible by ranks, limits) are checked now, for every point, before any run.
    try {
      resolve_run(run_request(a, {fmt::format("{}={}", keys::kGlobalBatchSize, p.global_batch)}), 0, n);
    } catch (const UserError& e) {
      throw UserError(fmt::format("{} ranks, global batch {}: {}", n, p.global_batch, e.what()), e.exit_code);
    }
    points.push_back(p);
  }
  return points;
}

std::vector<std::string> train_words(const ScaleArgs& a, const std::string& exe, const PointPlan& p) {
  std::vector<std::string> w = {exe, "--log-level", "info", "train", "--benchmark", a.benchmark, "--scale", a.scale,
                                "--data-dir", a.data_dir, "--device", a.device, "--precision", a.precision, "--results-dir",
                                (fs::path(p.dir) / "results").string(), "--system", "scale", "--step-stats",
                                (fs::path(p.dir) / "step_stats.json").string(), "--progress-seconds", "60"};
  for (const std::string& s : a.sets) w.insert(w.end(), {"--set", s});
  w.insert(w.end(), {"--set", fmt::format("{}={}", keys::kGlobalBatchSize, p.global_batch)});
  if (!a.to_target) w.insert(w.end(), {"--max-steps", std::to_string(a.steps)});
  return w;
}

// Sizes from 64 KiB up to the first power of two at or above the gradient, factor 4.
size_t comm_bench_top_bytes(double grad_bytes) {
  size_t top = 64 << 10;
  while (static_cast<double>(top) < grad_bytes) top *= 2;
  return top;
}

std::vector<std::string> comm_bench_words(const std::string& exe, const PointPlan& p, double grad_bytes,
                                          const std::string& device) {
  const size_t top = comm_bench_top_bytes(grad_bytes);
  // --bucketed: exactly the trainer's path (its buckets, backend choice and overlap machinery).
  return {exe, "comm-bench", "-b", "64K", "-e", std::to_string(top), "-f", "4", "-n", "20", "-w", "3", "--bucketed",
          "--device", device, "--json", (fs::path(p.dir) / "comm_bench.json").string()};
}

void run_child(const std::vector<std::string>& argv, const std::string& log, const std::set<int>& ok_codes,
               int* code_out) {
  const int code = run_logged(argv, log);
  if (code_out) *code_out = code;
  if (!ok_codes.count(code))
    throw UserError(fmt::format("'{}' exited with {}; the end of {}:\n{}", join_words(argv), code, log,
                                tail_of_file(log, 15)),
                    code == kExitUsage ? kExitUsage : kExitInternal);
}

// The point of a step_stats.json: its mean work per step rounded to whole samples (translation
// batches vary in tokens), every other field read strictly (a missing one names the file).
MeasuredStep measured_step(nlohmann::json stats, const std::string& path) {
  stats["global_batch"] = std::llround(stats.at("global_batch").get<double>());
  return scaling::measured_step_from_json(stats, path);
}

std::string ms(double s) { return fmt::format("{:.1f}", 1000.0 * s); }

}  // namespace

int run_scale_command(const ScaleArgs& a, const GlobalArgs&, const char* argv0) {
  if (started_by_mpi_launcher())
    throw UserError("scale starts the ranks itself: run it without mpirun/srun (inside an allocation it uses srun)", 2);
  const bool weak = !a.strong;
  const int cores =
      a.cores_per_node > 0 ? a.cores_per_node : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const fs::path out(a.output_dir);
  if (fs::exists(out / "scale.json"))
    throw UserError(out.string() + " already holds a scale.json: choose another --output-dir or move it away", 2);
  const std::vector<PointPlan> points = plan_points(a, weak);
  for (const PointPlan& p : points) {
    if (fs::exists(p.dir) && !fs::is_empty(p.dir))
      throw UserError(p.dir + " is not empty: choose another --output-dir or move it away", 2);
  }
  const std::string exe = own_executable(argv0);
  const std::string what = a.to_target ? std::string("to the target") : fmt::format("{} steps each", a.steps);
  std::printf("scale: %s %s, %s scaling, ranks %s, %s; logs in %s\n", a.benchmark.c_str(), a.scale.c_str(),
              weak ? "weak" : "strong", fmt::format("{}", fmt::join(a.ranks, ",")).c_str(), what.c_str(), out.c_str());
  std::printf("scale: launcher: %s\n", describe_launcher(a.launcher, cores).c_str());
  std::fflush(stdout);

  nlohmann::json runs = nlohmann::json::array();
  std::vector<MeasuredStep> measured;
  std::vector<CommSample> comm;
  double grad_bytes = 0.0;
  for (const PointPlan& p : points) {
    fs::create_directories(p.dir);
    const std::string log = (fs::path(p.dir) / "train.log").string();
    std::vector<std::string> argv = launcher_words(a.launcher, p.ranks, cores);
    const std::vector<std::string> train = train_words(a, exe, p);
    argv.insert(argv.end(), train.begin(), train.end());
    std::printf("scale: %d rank(s), global batch %lld: training ... ", p.ranks, static_cast<long long>(p.global_batch));
    std::fflush(stdout);
    int code = 0;
    // --max-steps ends a run as aborted (exit 3) by design; to the target, 3 means not reached.
    run_child(argv, log, {kExitSuccess, kExitAborted}, &code);
    const std::string stats_path = (fs::path(p.dir) / "step_stats.json").string();
    nlohmann::json stats = read_json(stats_path);
    grad_bytes = stats.at("grad_bytes").get<double>();
    const MeasuredStep m = measured_step(stats, stats_path);
    measured.push_back(m);
    std::printf("%s ms per step, %.0f %s/s\n", ms(m.step_s).c_str(), stats.at("throughput").get<double>(),
                stats.at("work_unit").get<std::string>().c_str());
    stats["exit_code"] = code;
    runs.push_back(stats);
    if (p.ranks > 1 && !a.no_comm_bench) {
      std::vector<std::string> cb = launcher_words(a.launcher, p.ranks, cores);
      const std::vector<std::string> bench = comm_bench_words(exe, p, grad_bytes, a.device);
      cb.insert(cb.end(), bench.begin(), bench.end());
      std::printf("scale: %d rank(s): comm-bench allreduce 64 KiB .. %zu KiB ... ", p.ranks,
                  comm_bench_top_bytes(grad_bytes) >> 10);
      std::fflush(stdout);
      run_child(cb, (fs::path(p.dir) / "comm_bench.log").string(), {kExitSuccess}, nullptr);
      const nlohmann::json cj = read_json((fs::path(p.dir) / "comm_bench.json").string());
      for (const auto& r : cj.at("results"))
        comm.push_back({p.ranks, m.ranks_per_node, r.at("size").get<double>(), 1e-6 * r.at("time_us").get<double>()});
      std::printf("done\n");
    }
  }

  if (comm.empty())  // --no-comm-bench: each step's bucket spans, an allreduce of the whole gradient
    for (const MeasuredStep& m : measured)
      if (m.ranks > 1) comm.push_back({m.ranks, m.ranks_per_node, grad_bytes, m.comm_busy_s});

  // The model: compute from the smallest rank count, the allreduce from comm-bench (the formula
  // that fits the measured sizes best); every other point is a prediction.
  scaling::AllreduceAlgo algo = scaling::AllreduceAlgo::ring;
  scaling::ScalingProfile profile;
  std::string fits;
  for (auto formula : {scaling::AllreduceAlgo::ring, scaling::AllreduceAlgo::tree, scaling::AllreduceAlgo::allgather}) {
    const scaling::ScalingProfile fit = scaling::fit_profile(measured, comm, grad_bytes, cores, formula, 1);
    fits += fmt::format("{}{} {:.1f}%", fits.empty() ? "" : ", ", scaling::algo_name(formula), 100.0 * fit.comm_fit_rms);
    if (formula == scaling::AllreduceAlgo::ring || fit.comm_fit_rms < profile.comm_fit_rms) {
      profile = fit;
      algo = formula;
    }
  }
  const std::string link_source =
      comm.empty() ? "no communication measured" : fmt::format("fitted to {} allreduce sample(s)", comm.size());
  const scaling::Network host =
      profile.has_inter
          ? scaling::measured_network(profile.intra, profile.inter, measured.back().ranks_per_node, link_source)
          : scaling::measured_network(profile.intra, measured.back().ranks_per_node, link_source);
  const std::vector<scaling::PointError> errors = scaling::prediction_errors(profile, host, measured);

  const MeasuredStep& base = measured.front();
  const double base_tp = base.global_batch / base.step_s;
  std::printf("\n%s %s, %s scaling (%s per step; ms per step, means over ranks and steps after warm-up)\n",
              a.benchmark.c_str(), a.scale.c_str(), weak ? "weak" : "strong",
              runs[0].at("work_unit").get<std::string>().c_str());
  std::printf("%6s %9s %9s %9s %9s %9s %9s %9s %12s %6s %10s %7s%s\n", "ranks", "batch", "step", "compute", "comm",
              "skew", "update", "busy", "throughput", "eff%", "predicted", "error%", a.to_target ? "   time to train" : "");
  std::string csv = "ranks,ranks_per_node,global_batch,step_s,compute_s,comm_s,skew_s,other_s,comm_busy_s,throughput,"
                    "efficiency,predicted_step_s,error,status,time_to_train_s\n";
  for (size_t i = 0; i < measured.size(); ++i) {
    const MeasuredStep& m = measured[i];
    const double tp = m.global_batch / m.step_s;
    const double eff = tp / (base_tp * m.ranks / base.ranks);
    const bool oversubscribed = m.ranks_per_node > cores;
    std::string ttt;
    if (a.to_target) {
      // The time model alone, given the epochs this run took: its steps at the predicted step time
      // plus its evaluations at the predicted evaluation time (convergence is `plan`'s other half).
      const double steps = runs[i].at("steps").get<double>() + runs[i].at("skipped_steps").get<double>();
      const double evals = runs[i].at("evals").get<double>();
      const double predicted = steps * errors[i].predicted.total_s +
                               evals * scaling::eval_seconds(profile, m.ranks, m.ranks_per_node, m.eval_samples);
      const double measured_ttt = runs[i].at("time_to_train_s").get<double>();
      ttt = fmt::format("   {:.1f} s ({}, {} epochs; predicted {:.1f} s, {:+.1f}%)", measured_ttt,
                        runs[i].at("status").get<std::string>(), runs[i].at("epochs").get<int>(), predicted,
                        100.0 * (predicted - measured_ttt) / measured_ttt);
      runs[i]["predicted_time_to_train_s"] = predicted;
    }
    std::printf("%6d %9lld %9s %9s %9s %9s %9s %9s %12.0f %6.1f %10s %+7.1f%s%s\n", m.ranks,
                static_cast<long long>(m.global_batch), ms(m.step_s).c_str(), ms(m.compute_s).c_str(),
                ms(m.comm_s).c_str(), ms(m.skew_s).c_str(), ms(m.other_s).c_str(), ms(m.comm_busy_s).c_str(), tp,
                100.0 * eff, ms(errors[i].predicted.total_s).c_str(), 100.0 * errors[i].rel_error, ttt.c_str(),
                oversubscribed ? "  (oversubscribed: ranks share cores)" : "");
    runs[i]["efficiency"] = eff;
    runs[i]["predicted_step_s"] = errors[i].predicted.total_s;
    runs[i]["error"] = errors[i].rel_error;
    runs[i]["in_sample"] = errors[i].in_sample;
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", m.ranks, m.ranks_per_node, m.global_batch,
                       m.step_s, m.compute_s, m.comm_s, m.skew_s, m.other_s, m.comm_busy_s, tp, eff,
                       errors[i].predicted.total_s, errors[i].rel_error, runs[i].at("status").get<std::string>(),
                       runs[i].at("time_to_train_s").get<double>());
  }
  std::printf("\nmodel: compute %.3g ms per sample + %.3g ms per step (fitted at %d rank(s): error%% there is "
              "in-sample, elsewhere a prediction); update %.3g ms; compute cv %.3f; overlap %.0f%%\n",
              1e3 * profile.seconds_per_sample, 1e3 * profile.fixed_compute_s, base.ranks, 1e3 * profile.other_s,
              profile.compute_cv, 100.0 * profile.overlap_fraction);
  if (!comm.empty())
    std::printf("allreduce: %s formula, %s%s (RMS error of the fits: %s)\n", scaling::algo_name(algo),
                profile.has_inter ? "within a node " : "", scaling::describe_link(profile.intra).c_str(), fits.c_str());
  if (profile.has_inter)
    std::printf("across nodes: %s (RMS error %.1f%%)\n", scaling::describe_link(profile.inter).c_str(),
                100.0 * profile.inter_fit_rms);
  std::printf("gradient: %.0f bytes per rank per step; %d core(s) per node\n", grad_bytes, cores);

  scaling::ScaleFile file;
  file.benchmark = a.benchmark;
  file.scale = a.scale;
  file.mode = weak ? "weak" : "strong";
  file.points = measured;
  file.comm = comm;
  file.grad_bytes = grad_bytes;
  file.cores_per_node = cores;
  file.profile = profile;
  nlohmann::json doc = scaling::to_json(file);
  doc["steps"] = a.to_target ? 0 : a.steps;
  doc["to_target"] = a.to_target;
  doc["runs"] = runs;
  const std::string json_text = doc.dump(2) + "\n";
  write_file_atomically((out / "scale.csv").string(), csv.data(), csv.size());
  write_file_atomically((out / "scale.json").string(), json_text.data(), json_text.size());
  std::printf("wrote %s and %s\n", (out / "scale.json").c_str(), (out / "scale.csv").c_str());
  return kExitSuccess;
}

}  // namespace mlpd::cli
