#include "train/trainer.h"

#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "comm/collectives.h"
#include "comm/gather_strings.h"
#include "core/check.h"
#include "core/fpu.h"
#include "mlperf/config.h"
#include "mlperf/keys.h"
#include "mlperf/mllog.h"
#include "mlperf/rules.h"
#include "train/hyperparams.h"
#include "train/step.h"
#include "workloads/workload.h"

namespace mlpd {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Writes `bytes` to `path` through a temporary file and a rename: never a half-written file.
void write_file_atomically(const std::string& path, const void* bytes, size_t n) {
  std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw UserError("cannot write " + tmp);
    f.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(n));
    if (!f) throw UserError("write failed: " + tmp);
  }
  std::filesystem::rename(tmp, path);
}

void log_submission(MlLog& log, const TrainOptions& opts, const World& w, bool open_division) {
  nlohmann::json meta = {{keys::kScale, opts.scale}};
  if (open_division) meta[keys::kTestTarget] = opts.test_target;
  mllog_event(log, keys::kSubmissionBenchmark, opts.benchmark, meta);
  mllog_event(log, keys::kSubmissionDivision, open_division ? keys::kOpen : keys::kClosed);
  mllog_event(log, keys::kSubmissionOrg, "mlperf-dist");
  mllog_event(log, keys::kSubmissionPlatform,
              std::to_string(w.nodes) + "x" + w.hostname + " (" + std::to_string(w.size) + " ranks, CPU)");
  mllog_event(log, keys::kSubmissionStatus, "onprem");
  mllog_event(log, keys::kSubmissionPocName, "mlperf-dist");
  mllog_event(log, keys::kSubmissionPocEmail, "mlperf-dist@localhost");
}

}  // namespace

void connect_gradients(Workload& wl, Communicator& comm, Trace* trace) {
  Communicator* c = &comm;
  ParamStore* store = &wl.store;
  wl.grad_ready = [c, store, trace](size_t view) {
    if (trace && trace->enabled()) {
      const double now = MPI_Wtime();
      std::string name = (trace->first_in_step ? "forward, loss, backward " : "backward ") + store->views[view].name;
      trace_add(*trace, {std::move(name), "backward", trace->mark_s, now, 0, 0});
      trace->mark_s = now;
      trace->first_in_step = false;
    }
    grad_ready(*c, *store, view);
  };
}

StepOutcome train_one_step(const World& w, Communicator& comm, Workload& wl, Optimizer& opt, float lr, int epoch,
                           int64_t batch, Trace* trace) {
  const bool tracing = trace && trace->enabled();
  const double t0 = MPI_Wtime();
  if (tracing) {
    trace->mark_s = t0;
    trace->first_in_step = true;
  }
  std::fill(wl.store.grads.begin(), wl.store.grads.end(), 0.0f);
  grads_begin_step(comm);
  TrainStepStats st = wl.train_step(epoch, batch);
  const double t_backward_done = MPI_Wtime();
  StepOutcome o;
  grads_finish_step(comm, wl.store);
  const double t_comm_done = MPI_Wtime();
  o.comm_seconds = t_comm_done - t_backward_done;
  optimizer_step(opt, wl.store, lr);
  // The global mean loss: exact and identical on every rank (so every rank agrees to stop on NaN).
  double loss_and_count[2] = {st.loss_sum, static_cast<double>(st.samples)};
  allreduce_sum_doubles(w, loss_and_count, 2);
  o.loss = loss_and_count[0] / loss_and_count[1];
  o.samples = static_cast<int64_t>(loss_and_count[1]);
  if (tracing) {
    const double t_end = MPI_Wtime();
    for (const CommSpan& sp : take_spans(comm))
      trace_add(*trace, {sp.name + " bucket " + std::to_string(sp.bucket), "comm", sp.start_s, sp.end_s, 1, sp.bytes});
    trace_add(*trace, {"wait for buckets", "comm", t_backward_done, t_comm_done, 0, 0});
    trace_add(*trace, {"optimizer + loss allreduce", "optimizer", t_comm_done, t_end, 0, 0});
    trace_add(*trace, {"step " + std::to_string(trace->steps_traced + 1), "step", t0, t_end, 2, 0});
    ++trace->steps_traced;
  } else if (trace) {
    take_spans(comm);  // keep the communicator's span buffer bounded
  }
  return o;
}

nlohmann::json resolve_train_config(const TrainOptions& opts) {
  nlohmann::json cfg = resolve_config(workload_defaults_yaml(opts.benchmark, opts.scale), opts.config_file, opts.sets);
  enforce_rules(opts.benchmark, opts.scale, cfg);
  make_hyperparams(cfg, 1);  // our own keys (lr_decay) are validated here too, before any work
  return cfg;
}

TrainResult run_training(World& w, const TrainOptions& opts) {
  enable_flush_denormals();
  const bool rank0 = w.rank == 0;
  const auto init_clock = Clock::now();
  nlohmann::json cfg = resolve_train_config(opts);
  const bool open_division = opts.test_target > 0.0;
  const double target = open_division ? opts.test_target : quality_target(opts.benchmark, opts.scale);
  const int max_epochs = cfg.at("max_epochs").get<int>();
  const uint64_t seed = cfg.at("seed").get<uint64_t>();
  if (max_epochs <= 0) throw UserError("max_epochs must be positive", 2);

  if (rank0) {
    std::printf("mlperf-dist train: benchmark %s, scale %s, %d rank(s) on %d node(s)\n", opts.benchmark.c_str(),
                opts.scale.c_str(), w.size, w.nodes);
    std::printf("resolved config:\n%s", format_config(cfg).c_str());
    std::printf("flush-to-zero and denormals-are-zero: %s on every computing thread\n",
                denormals_flushed() ? "on" : "NOT available");
    std::fflush(stdout);
  }

  MlLog log = open_mllog(rank0, opts.results_dir, opts.system, opts.benchmark, true);
  log_submission(log, opts, w, open_division);
  mllog_event(log, keys::kCacheClear, true);
  mllog_start(log, keys::kInitStart);

  WorkloadContext ctx{w.rank, w.size, opts.data_dir};
  std::unique_ptr<Workload> wl = make_workload(opts.benchmark, opts.scale, cfg, ctx);
  wl->init_parameters(seed);
  broadcast_parameters(w, wl->store);
  Hyperparams hp = make_hyperparams(cfg, wl->batches_per_epoch);
  init_optimizer(hp.optimizer, wl->store);
  CommConfig comm_cfg = opts.comm;
  comm_cfg.record_spans = !opts.trace_path.empty();
  std::unique_ptr<Communicator> comm = make_communicator(w, comm_cfg, wl->store);
  Trace trace;
  trace.path = opts.trace_path;
  trace.max_steps = opts.trace_steps;
  connect_gradients(*wl, *comm, &trace);

  mllog_event(log, keys::kMlpdConfig, cfg);
  mllog_event(log, keys::kSeed, seed);
  mllog_event(log, keys::kGlobalBatchSize, wl->global_batch);
  mllog_event(log, keys::kTrainSamples, wl->train_samples);
  mllog_event(log, keys::kEvalSamples, wl->eval_samples);
  mllog_event(log, keys::kModelBnSpan, wl->bn_span);
  for (const auto& [k, v] : hp.mllog_entries) mllog_event(log, k, v);
  if (rank0) {
    std::printf("model: %s\n", wl->model_summary.c_str());
    std::printf("communication: %s\n", describe(*comm).c_str());
    std::printf("data: %lld train / %lld eval samples, %lld steps per epoch, bn span %lld, target %s %.4f%s\n",
                static_cast<long long>(wl->train_samples), static_cast<long long>(wl->eval_samples),
                static_cast<long long>(wl->batches_per_epoch), static_cast<long long>(wl->bn_span),
                wl->metric_name.c_str(), target, open_division ? " (test target: division open)" : "");
    std::printf("init: %.2f s\n", seconds_since(init_clock));
    std::fflush(stdout);
  }
  barrier(w);
  mllog_end(log, keys::kInitStop);

  std::FILE* loss_log = nullptr;
  if (rank0 && !opts.loss_log.empty()) {
    loss_log = std::fopen(opts.loss_log.c_str(), "w");
    if (!loss_log) throw UserError("cannot write the loss log " + opts.loss_log);
  }

  // ---- the timed region: run_start .. run_stop ----
  barrier(w);
  mllog_start(log, keys::kRunStart);
  const auto run_clock = Clock::now();
  trace.origin_s = MPI_Wtime();
  TrainResult r;
  r.status = keys::kAborted;
  double step_seconds = 0.0, comm_seconds = 0.0;
  int64_t samples_trained = 0;
  int64_t step = 0;
  bool stop = false;
  auto last_print = Clock::now();
  double window_loss = 0.0, window_seconds = 0.0;
  int64_t window_steps = 0, window_samples = 0;

  for (int epoch = 1; epoch <= max_epochs && !stop; ++epoch) {
    const bool block_begins = (epoch - 1) % wl->eval_every_epochs == 0;
    if (block_begins)
      mllog_start(log, keys::kBlockStart, nullptr,
                  {{keys::kFirstEpochNum, epoch}, {keys::kEpochCount, wl->eval_every_epochs}});
    mllog_start(log, keys::kEpochStart, nullptr, {{keys::kEpochNum, epoch}});
    for (int64_t b = 0; b < wl->batches_per_epoch; ++b) {
      const auto t0 = Clock::now();
      const float lr = static_cast<float>(lr_at(hp.schedule, step));
      StepOutcome so = train_one_step(w, *comm, *wl, hp.optimizer, lr, epoch - 1, b, &trace);
      const double loss = so.loss;
      const double comm = so.comm_seconds;
      const double dt = seconds_since(t0);
      ++step;
      step_seconds += dt;
      comm_seconds += comm;
      samples_trained += so.samples;
      window_loss += loss;
      window_seconds += dt;
      ++window_steps;
      window_samples += so.samples;
      if (loss_log) std::fprintf(loss_log, "%lld %a\n", static_cast<long long>(step), loss);
      if (!std::isfinite(loss)) {
        if (rank0) std::fprintf(stderr, "loss is not finite at step %lld: aborting the run\n", static_cast<long long>(step));
        stop = true;
        break;
      }
      if (rank0 && (seconds_since(last_print) >= opts.progress_seconds || b + 1 == wl->batches_per_epoch)) {
        std::printf("epoch %d step %lld/%lld | loss %.4f | lr %.4g | %.0f ms | %.0f %s/s\n", epoch,
                    static_cast<long long>(b + 1), static_cast<long long>(wl->batches_per_epoch),
                    window_loss / static_cast<double>(window_steps), lr,
                    1000.0 * window_seconds / static_cast<double>(window_steps),
                    static_cast<double>(window_samples) / window_seconds, wl->sample_unit.c_str());
        std::fflush(stdout);
        last_print = Clock::now();
        window_loss = window_seconds = 0.0;
        window_steps = window_samples = 0;
      }
      if (opts.max_steps > 0 && step >= opts.max_steps) {
        stop = true;
        break;
      }
    }
    mllog_end(log, keys::kEpochStop, nullptr, {{keys::kEpochNum, epoch}});
    r.epochs = epoch;
    const bool block_ends = epoch % wl->eval_every_epochs == 0 || epoch == max_epochs || stop;
    if (block_ends) {
      mllog_start(log, keys::kEvalStart, nullptr, {{keys::kEpochNum, epoch}});
      const auto te = Clock::now();
      EvalCounts c = wl->evaluate();
      MLPD_CHECK(c.extra.size() == wl->extra_metric_names.size(), "evaluate() returned the wrong number of extra metrics");
      std::vector<double> counts{c.numerator, c.denominator};
      counts.insert(counts.end(), c.extra.begin(), c.extra.end());
      allreduce_sum_doubles(w, counts.data(), counts.size());
      r.final_metric = counts[0] / counts[1];
      mllog_event(log, keys::kEvalAccuracy, r.final_metric, {{keys::kEpochNum, epoch}});
      mllog_end(log, keys::kEvalStop, nullptr, {{keys::kEpochNum, epoch}});
      if (rank0) {
        std::string extras;
        for (size_t i = 0; i < wl->extra_metric_names.size(); ++i)
          extras += " | " + wl->extra_metric_names[i] + " " + std::to_string(counts[2 + i] / counts[1]);
        std::printf("eval epoch %d | %s %.4f (target %.4f)%s | %.0f samples in %.1f s\n", epoch,
                    wl->metric_name.c_str(), r.final_metric, target, extras.c_str(), counts[1], seconds_since(te));
        std::fflush(stdout);
      }
      if (r.final_metric >= target) {
        r.success = true;
        stop = true;
      }
    }
    if (block_ends)
      mllog_end(log, keys::kBlockStop, nullptr,
                {{keys::kFirstEpochNum, epoch - (epoch - 1) % wl->eval_every_epochs}});
  }
  r.status = r.success ? keys::kSuccess : keys::kAborted;
  r.sample_unit = wl->sample_unit;
  mllog_end(log, keys::kRunStop, nullptr, {{keys::kStatus, r.status}});
  r.time_to_train_s = seconds_since(run_clock);
  r.steps = step;
  r.throughput = step_seconds > 0 ? static_cast<double>(samples_trained) / step_seconds : 0.0;
  r.comm_share = step_seconds > 0 ? comm_seconds / step_seconds : 0.0;
  r.mean_step_ms = step > 0 ? 1000.0 * step_seconds / static_cast<double>(step) : 0.0;
  if (loss_log) std::fclose(loss_log);
  r.result_path = close_mllog(log);
  if (!trace.path.empty()) {
    std::vector<std::string> parts = gather_strings(w, trace_events_json(trace, w.rank));
    if (rank0) {
      write_trace_file(trace.path, parts);
      std::printf("trace: %d step(s) of %d rank(s) in %s\n", trace.steps_traced, w.size, trace.path.c_str());
    }
  }
  if (rank0 && !opts.dump_params.empty())
    write_file_atomically(opts.dump_params, wl->store.params.data(), wl->store.params.size() * sizeof(float));
  if (rank0) {
    std::printf("%s", format_summary(opts, w, cfg, r).c_str());
    std::fflush(stdout);
  }
  return r;
}

std::string format_summary(const TrainOptions& opts, const World& w, const nlohmann::json& cfg, const TrainResult& r) {
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "==== result ====\n"
                "benchmark: %s\n"
                "scale: %s\n"
                "ranks: %d (%d node(s))\n"
                "global batch: %lld\n"
                "status: %s\n"
                "time to train: %.1f s (run_start to run_stop)\n"
                "epochs: %d (%lld steps, %.1f ms per step)\n"
                "final metric: %.4f\n"
                "throughput: %.0f %s/s\n"
                "communication: %.1f%% of step time\n"
                "result log: %s\n",
                opts.benchmark.c_str(), opts.scale.c_str(), w.size, w.nodes,
                static_cast<long long>(cfg.at("global_batch_size").get<int64_t>()), r.status.c_str(), r.time_to_train_s,
                r.epochs, static_cast<long long>(r.steps), r.mean_step_ms, r.final_metric, r.throughput,
                r.sample_unit.c_str(), 100.0 * r.comm_share, r.result_path.empty() ? "(none)" : r.result_path.c_str());
  return buf;
}

}  // namespace mlpd
