// `mlperf-dist suite`: MLPerf's result procedure. Each benchmark is trained N times, each run a
// fresh init with its own seed, into results/<system>/<benchmark>/result_<i>.txt, and scored by
// the olympic mean; the system is described once in systems/<system>.json.
#include <cblas.h>
#include <mpi.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>

#include "cli/commands.h"
#include "comm/collectives.h"
#include "comm/world.h"
#include "core/check.h"
#include "core/log.h"
#include "core/output_paths.h"
#include "mlperf/result_set.h"
#include "train/stop_signal.h"
#include "train/system_description.h"
#include "workloads/registry.h"

namespace mlpd::cli {

namespace {

struct SuitePlan {
  const WorkloadEntry* entry = nullptr;
  int runs = 0;      // runs to train
  int required = 0;  // runs MLPerf asks for at this scale
  std::string dir;   // results/<system>/<benchmark>
};

std::vector<SuitePlan> plan_suite(const SuiteArgs& a) {
  std::vector<std::string> names = a.benchmarks;
  if (names.empty())
    for (const WorkloadEntry* e : workload_entries())
      for (const ScaleSpec& s : e->spec.scales)
        if (s.name == a.scale) names.push_back(e->spec.name);
  std::vector<SuitePlan> plan;
  for (const std::string& n : names) {
    SuitePlan p;
    p.entry = &find_workload(n);
    p.required = find_scale(p.entry->spec, a.scale).result_runs;
    p.runs = a.runs > 0 ? a.runs : p.required;
    p.dir = (std::filesystem::path(a.results_dir) / a.system / n).string();
    // A score is over exactly the runs of this suite: earlier results would be counted with them.
    if (holds_result_files(p.dir))
      throw UserError(p.dir + " already holds result files: move them away or choose another --results-dir or "
                      "--system (a suite's score is over its own runs only)", 2);
    for (const SuitePlan& q : plan)
      if (q.entry == p.entry) throw UserError("--benchmarks names " + n + " twice", 2);
    plan.push_back(p);
  }
  if (plan.empty()) throw UserError("no workload has the scale " + a.scale, 2);
  return plan;
}

std::string minutes(double s) { return fmt::format("{:.2f} min", s / 60.0); }

// Rank 0: the benchmark's runs as written, scored; one line per run and the score.
bool report_benchmark(const SuitePlan& p, std::string& summary) {
  const std::vector<BenchmarkResults> sets = read_results(p.dir, &find_benchmark_spec);
  const std::vector<RunRecord>& runs = sets.front().runs;
  // Fewer runs than MLPerf asks for (--runs) still get their olympic mean, labelled a study.
  const OlympicScore score = olympic_score(runs, std::min(p.required, p.runs));
  const std::string& name = p.entry->spec.name;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunRecord& r = runs[i];
    const char* mark = static_cast<int>(i) == score.dropped_fastest   ? " (dropped: fastest)"
                       : static_cast<int>(i) == score.dropped_slowest ? " (dropped: slowest)"
                                                                      : "";
    summary += fmt::format("  {} result_{}: seed {}, {}, {}, {} {}{}\n", name, r.index, r.seed.value_or(0),
                           r.check.status.empty() ? "no status" : r.check.status,
                           r.check.run_seconds ? minutes(*r.check.run_seconds) : "no time",
                           p.entry->spec.metric.name,
                           r.check.final_accuracy ? fmt::format("{:.4f}", *r.check.final_accuracy) : "none", mark);
  }
  if (score.valid) {
    summary += fmt::format("{}: score {} (olympic mean of {} runs, {} converged)\n", name, minutes(score.mean_s),
                           score.runs, score.converged);
  } else {
    summary += fmt::format("{}: no score: {}\n", name, score.why);
  }
  return score.valid;
}

}  // namespace

void add_suite_command(CLI::App& app, SuiteArgs& a) {
  auto* c = app.add_subcommand(
      "suite",
      "MLPerf's result procedure: train each benchmark N times (fresh init, its own seed each run) and score it by the "
      "olympic mean (drop the fastest and the slowest run; at most one run may miss the target, and only as the "
      "slowest). Run it under mpirun like train.");
  a.system = default_system_name();
  c->footer(
      "Writes <results-dir>/<system>/<benchmark>/result_<i>.txt (the folder must hold no results yet) and\n"
      "<results-dir>/../systems/<system>.json (MLPerf's submission layout; kept when it exists).\n"
      "Example: mpirun -np 2 mlperf-dist suite --scale mini --benchmarks resnet,ncf --runs 5\n"
      "Exit codes: 0 every benchmark scored; 3 a benchmark has no score (too many runs missed the\n"
      "target, or fewer runs than the olympic mean needs); 2 usage error, bad config or data; 1 internal error.");
  c->add_option("--benchmarks,-b", a.benchmarks, "Comma-separated workloads (default: all with the scale): " +
                                                     workload_list_text())
      ->delimiter(',')
      ->check(CLI::IsMember(workload_names()));
  c->add_option("--scale,-s", a.scale, "mini or reference")->check(CLI::IsMember({"mini", "reference"}))->capture_default_str();
  c->add_option("--runs,-n", a.runs,
                "Runs per benchmark (default: MLPerf's number for the benchmark: resnet 5, ncf 50 at reference and 10 "
                "at mini); fewer than that is a study, not a result")
      ->check(CLI::Range(1, 1000));
  c->add_option("--results-dir", a.results_dir, "As train: results go to <results-dir>/<system>/<benchmark>/")->capture_default_str();
  c->add_option("--system", a.system, "System name (results path and systems/<system>.json)")->capture_default_str();
  c->add_option("--data-dir", a.data_dir, "Directory of prepared datasets (see `mlperf-dist prepare`)")->capture_default_str();
  add_compute_options(c, a.device, a.precision);
  c->add_option("--seed-base", a.seed_base,
                "Run i of each benchmark uses seed base+i (default: a random base, printed; give it to reproduce a suite)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  c->add_option("--set", a.sets, "Override one config key of every benchmark: --set key=value (repeatable)");
  c->add_option("--progress-seconds", a.progress_seconds, "At most one step line per this many seconds")->capture_default_str();
}

int run_suite_command(SuiteArgs& a, const GlobalArgs& g, int argc, char** argv) {
  openblas_set_num_threads(1);
  World w = init_world(&argc, &argv);
  install_stop_signal_handlers();
  std::vector<SuitePlan> plan;
  int failed = agree_on_setup(w, [&] {
    init_logging(w.rank, g.log_level);
    check_path_component("--system", a.system);
    plan = plan_suite(a);
  });
  if (failed) {
    finalize_world(w);
    return failed;
  }
  // One seed base for every rank (rank 0 draws it): the ranks of a run must share its seed.
  int64_t base = a.seed_base;
  if (base < 0 && w.rank == 0) base = static_cast<int64_t>(std::random_device{}() % 1000000000u);
  MPI_Bcast(&base, 1, MPI_INT64_T, 0, w.comm);
  const Device device = parse_device(a.device);
  const Precision precision = parse_compute_precision(a.precision);
  const nlohmann::json system_desc = describe_system(w, a.system, device);
  failed = agree_on_setup(w, [&] {
    if (w.rank != 0) return;
    const std::string path = system_description_path(a.results_dir, a.system);
    load_or_write_system_description(path, system_desc);
    std::printf("suite: %s scale, %d rank(s), seed base %lld, system description %s\n", a.scale.c_str(), w.size,
                static_cast<long long>(base), path.c_str());
    std::fflush(stdout);
  });
  if (failed) {
    finalize_world(w);
    return failed;
  }

  std::string summary;
  bool all_scored = true;
  for (const SuitePlan& p : plan) {
    for (int i = 0; i < p.runs; ++i) {
      TrainOptions opts;
      opts.run.benchmark = p.entry->spec.name;
      opts.run.scale = a.scale;
      opts.run.data_dir = a.data_dir;
      opts.run.device = device;
      opts.run.precision = precision;
      opts.run.sets = a.sets;
      opts.run.sets.push_back("seed=" + std::to_string(base + i));
      opts.results_dir = a.results_dir;
      opts.system = a.system;
      opts.progress_seconds = a.progress_seconds;
      if (w.rank == 0) {
        std::printf("suite: %s run %d/%d, seed %lld\n", p.entry->spec.name.c_str(), i + 1, p.runs,
                    static_cast<long long>(base + i));
        std::fflush(stdout);
      }
      ResolvedRun run;
      failed = agree_on_setup(w, [&] { run = resolve_run(opts.run, w.rank, w.size); });
      TrainResult r;
      const int code = failed ? failed : train_agreed(w, run, opts, r);
      if (code != kExitSuccess && code != kExitAborted) {  // a real error, not a missed target
        finalize_world(w);
        return code;
      }
      if (stop_signal_received()) {
        if (w.rank == 0) std::fprintf(stderr, "suite: stopped by a signal after %s run %d\n", p.entry->spec.name.c_str(), i + 1);
        finalize_world(w);
        return kExitAborted;
      }
    }
    if (w.rank == 0) {
      try {
        all_scored = report_benchmark(p, summary) && all_scored;
      } catch (const std::exception& e) {
        summary += p.entry->spec.name + ": no score: " + e.what() + "\n";
        all_scored = false;
      }
      if (p.runs < p.required)
        summary += fmt::format("{}: {} runs where MLPerf asks for {}: a study, not a result (check says so)\n",
                               p.entry->spec.name, p.runs, p.required);
    }
  }
  if (w.rank == 0) std::printf("==== suite ====\n%s", summary.c_str());
  const int code = static_cast<int>(allreduce_max(w, all_scored ? 0 : kExitAborted));
  finalize_world(w);
  return code;
}

}  // namespace mlpd::cli
