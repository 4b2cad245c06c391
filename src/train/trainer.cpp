#include "train/trainer.h"

#include <mpi.h>
#include <sys/resource.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "comm/collectives.h"
#include "comm/gather_strings.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "core/fpu.h"
#include "kernels/device.h"
#include "kernels/op_table.h"
#include "mlperf/config.h"
#include "mlperf/keys.h"
#include "mlperf/mllog.h"
#include "train/evaluate.h"
#include "train/checkpoint.h"
#include "train/step.h"
#include "train/step_stats.h"
#include "train/stop_signal.h"

namespace mlpd {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void log_submission(MlLog& log, const ResolvedRun& run, const TrainOptions& opts, const World& w, bool open_division) {
  nlohmann::json meta = {{keys::kScale, run.scale}};
  if (open_division) meta[keys::kTestTarget] = opts.test_target;
  mllog_event(log, keys::kSubmissionBenchmark, run.entry->spec.name, meta);
  mllog_event(log, keys::kSubmissionDivision, open_division ? keys::kOpen : keys::kClosed);
  mllog_event(log, keys::kSubmissionOrg, "mlperf-dist");
  mllog_event(log, keys::kSubmissionPlatform,
              std::to_string(w.nodes) + "x" + w.hostname + " (" + std::to_string(w.size) + " ranks, " +
                  device_name(run.device) + (run.precision == Precision::bf16 ? ", bf16" : "") + ")");
  mllog_event(log, keys::kSubmissionStatus, "onprem");
  mllog_event(log, keys::kSubmissionPocName, "mlperf-dist");
  mllog_event(log, keys::kSubmissionPocEmail, "mlperf-dist@localhost");
}

// What backward's grad-ready calls reach: the communicator, the store, the trace.
struct GradRouting {
  Communicator* comm;
  ParamStore* store;
  Trace* trace;
};

void route_grad_ready(void* ctx, size_t view) {
  auto* r = static_cast<GradRouting*>(ctx);
  if (r->trace && r->trace->enabled()) {
    const double now = MPI_Wtime();
    std::string name = (r->trace->first_in_step ? "forward, loss, backward " : "backward ") + r->store->views[view].name;
    trace_add(*r->trace, {std::move(name), "backward", r->trace->mark_s, now, 0, 0});
    r->trace->mark_s = now;
    r->trace->first_in_step = false;
  }
  grad_ready(*r->comm, *r->store, view);
}

// This process's proportional set size (/proc/self/smaps_rollup), 0 where the kernel lacks it.
double proportional_set_size_mib() {
  std::FILE* f = std::fopen("/proc/self/smaps_rollup", "r");
  if (!f) return 0.0;
  char line[256];
  double kib = 0.0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "Pss: %lf kB", &kib) == 1) break;
  std::fclose(f);
  return kib / 1024.0;
}

// Data parallelism keeps one model on every rank: after the run every rank's parameters must be
// bit-identical (a cheap end-to-end check of the allreduce path at any rank count). Also reports
// the ranks' peak memory, the limit at hundreds of ranks per node.
void check_replicas_agree(const World& w, const ParamStore& store) {
  const uint64_t mine = params_fingerprint(store);
  // Two 32-bit halves as doubles: exact, and max == min on every half iff all ranks agree.
  double v[4] = {static_cast<double>(mine >> 32), static_cast<double>(mine & 0xffffffffu),
                 -static_cast<double>(mine >> 32), -static_cast<double>(mine & 0xffffffffu)};
  for (double& x : v) x = allreduce_max(w, x);
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  const double rss_mib = static_cast<double>(ru.ru_maxrss) / 1024.0;
  const double max_rss = allreduce_max(w, rss_mib);
  // RSS counts shared library pages and shared-memory windows in every rank; PSS splits them.
  double pss_mib = proportional_set_size_mib();
  const double max_pss = allreduce_max(w, pss_mib);
  allreduce_sum_doubles(w, &pss_mib, 1);
  spdlog::info("memory: peak RSS per rank {:.0f} MiB at most; PSS now {:.0f} MiB per rank at most, {:.2f} GiB over {} "
               "ranks",
               max_rss, max_pss, pss_mib / 1024.0, w.size);
  if (v[0] != -v[2] || v[1] != -v[3])
    throw UserError("the ranks' parameters differ after training: the replicas diverged (fingerprint of rank " +
                    std::to_string(w.rank) + ": " + std::to_string(mine) + ")");
  spdlog::info("parameters identical on all {} ranks (fingerprint {:016x})", w.size, mine);
}

// Which path the sparse views' gradients took, and how often (comm/sparse_exchange.h).
void log_sparse_embeddings(const Communicator& comm) {
  const SparseStats st = sparse_stats(comm);
  if (st.views == 0) return;
  if (!st.active) {
    spdlog::info("sparse embeddings ({}): not used ({})", st.mode, st.inactive_why);
    return;
  }
  const double mean = st.sparse_steps > 0 ? st.gathered_bytes / static_cast<double>(st.sparse_steps) : 0.0;
  spdlog::info("sparse embeddings ({}): {} steps sparse, {} steps dense; a sparse step gathered {:.3f} MB on "
               "average (rows and indices of all ranks) where dense is {:.3f} MB",
               st.mode, st.sparse_steps, st.dense_steps, mean / 1e6, static_cast<double>(st.dense_bytes) / 1e6);
}

CheckpointKey checkpoint_key(const ResolvedRun& run, const World& w) {
  return {run.entry->spec.name, run.scale, config_hash(run.config.dump()), w.size};
}

// The state of one run between run_start and run_stop, and the services a driver calls.
class TrainLoop final : public LoopServices {
 public:
  TrainLoop(World& w, const ResolvedRun& run, const TrainOptions& opts, BuiltRun& built, MlLog& log, Trace& trace,
            double target, AtomicFile* loss_log, const TrainPosition& start)
      : w_(w), run_(run), opts_(opts), b_(built), wl_(*built.workload), log_(log), trace_(trace),
        loss_log_(loss_log), start_(start), step_(start.global_step), position_(start) {
    targets_ = scale_targets(find_scale(run.entry->spec, run.scale), opts.test_target);
    targets_[0] = target;
    if (!opts.test_fail_at.empty()) {
      const auto colon = opts.test_fail_at.find(':');
      try {
        if (colon == std::string::npos) throw std::invalid_argument("no colon");
        fail_rank_ = std::stoi(opts.test_fail_at.substr(0, colon));
        fail_step_ = std::stoll(opts.test_fail_at.substr(colon + 1));
      } catch (const std::exception&) {
        throw UserError("--test-fail-at " + opts.test_fail_at + ": expected RANK:STEP", 2);
      }
    }
  }

  void begin_epoch(int epoch) override {
    const int every = wl_.facts.eval_every_epochs;
    if ((epoch - 1) % every == 0)
      mllog_start(log_, keys::kBlockStart, nullptr, {{keys::kFirstEpochNum, epoch}, {keys::kEpochCount, every}});
    mllog_start(log_, keys::kEpochStart, nullptr, {{keys::kEpochNum, epoch}});
    steps_this_epoch_ = wl_.steps_in_epoch(epoch - 1);
  }

  bool train_step(int epoch, int64_t b) override {
    if (stopped_) return false;
    if (fail_rank_ == w_.rank && fail_step_ == step_ + 1)
      throw UserError("test fault (--test-fail-at): rank " + std::to_string(w_.rank) + " fails in step " +
                      std::to_string(step_ + 1));
    const auto t0 = Clock::now();
    const float lr = static_cast<float>(lr_at(b_.hyper.schedule, step_));
    StepOutcome so = train_one_step(w_, *b_.comm, wl_, b_.hyper.optimizer, lr, epoch - 1, b, &trace_);
    const double dt = seconds_since(t0);
    ++step_;
    step_seconds_ += dt;
    comm_seconds_ += so.comm_seconds;
    work_ += so.work;
    window_loss_ += so.loss;
    window_seconds_ += dt;
    ++window_steps_;
    window_work_ += so.work;
    if (loss_log_) loss_log_->write(fmt::format("{} {:a}\n", step_, so.loss));
    if (!opts_.step_stats.empty() && step_times_.size() < kMaxStepTimes)
      step_times_.push_back(
          {so.compute_seconds, so.comm_seconds, so.other_seconds, so.comm_busy_seconds, so.work, so.comm_bytes});
    position_ = {epoch, b + 1, step_};
    if (so.stop_requested) {
      spdlog::warn("stop requested by a signal: ending after step {}", step_);
      stopped_ = stop_for_checkpoint_ = true;
      return false;
    }
    if (!std::isfinite(so.loss)) {
      if (w_.rank == 0) spdlog::error("loss is not finite at step {}: aborting the run", step_);
      stopped_ = true;
      return false;
    }
    if (seconds_since(last_print_) >= opts_.progress_seconds || b + 1 == steps_this_epoch_) {
      spdlog::info("epoch {} step {}/{} | loss {:.4f} | lr {:.4g} | {:.0f} ms | {:.0f} {}/s", epoch, b + 1,
                   steps_this_epoch_, window_loss_ / static_cast<double>(window_steps_), lr,
                   1000.0 * window_seconds_ / static_cast<double>(window_steps_), window_work_ / window_seconds_,
                   wl_.facts.work_unit);
      last_print_ = Clock::now();
      window_loss_ = window_seconds_ = window_work_ = 0.0;
      window_steps_ = 0;
    }
    if (opts_.max_steps > 0 && step_ >= opts_.max_steps) {
      stopped_ = stop_for_checkpoint_ = true;
      return false;
    }
    return true;
  }

  void end_epoch(int epoch) override {
    mllog_end(log_, keys::kEpochStop, nullptr, {{keys::kEpochNum, epoch}});
    epochs_ = epoch;
    if (position_.step_in_epoch >= steps_this_epoch_) position_ = {epoch + 1, 0, step_};
  }

  bool evaluate(int epoch) override {
    const MetricSpec& m = run_.entry->spec.metric;
    mllog_start(log_, keys::kEvalStart, nullptr, {{keys::kEpochNum, epoch}});
    const auto te = Clock::now();
    EvalOutcome o = evaluate_everywhere(w_, wl_, m.secondary.size());
    eval_seconds_ += seconds_since(te);
    ++evals_;
    final_metric_ = o.metric;
    // The secondary metrics ride in the metadata (ndcg@10, AP50, minigo's games against GNU Go).
    // With parts (Mask R-CNN's {"BBOX", "SEGM"}), the first secondaries are the value's other parts.
    nlohmann::json meta = {{keys::kEpochNum, epoch}};
    const size_t in_value = m.parts.empty() ? 0 : m.parts.size() - 1;
    for (size_t i = in_value; i < m.secondary.size(); ++i) meta[m.secondary[i]] = o.secondary[i];
    mllog_event(log_, m.mllog_key, metric_log_value(m, o.metric, o.secondary), meta);
    mllog_end(log_, keys::kEvalStop, nullptr, {{keys::kEpochNum, epoch}});
    std::string extras;
    for (size_t i = 0; i < m.secondary.size(); ++i) {
      extras += fmt::format(" | {} {:.6f}", m.secondary[i], o.secondary[i]);
      if (i < in_value) extras += fmt::format(" (target {:.4f})", targets_[i + 1]);  // a part of the metric
    }
    spdlog::info("eval epoch {} | {} {:.4f} (target {}{:.4f}){} | {:.0f} samples in {:.1f} s", epoch, m.name, o.metric,
                 m.higher_is_better ? "" : "<= ", targets_[0], extras, o.samples, seconds_since(te));
    std::vector<double> values{o.metric};
    values.insert(values.end(), o.secondary.begin(), o.secondary.begin() + static_cast<std::ptrdiff_t>(in_value));
    if (metric_values_reached(m, values, targets_)) {
      success_ = true;
      stopped_ = true;
    }
    const int every = wl_.facts.eval_every_epochs;
    mllog_end(log_, keys::kBlockStop, nullptr, {{keys::kFirstEpochNum, epoch - (epoch - 1) % every}});
    return success_;
  }

  int max_epochs() const override { return run_.run.max_epochs; }
  bool stopped() const override { return stopped_; }
  std::vector<std::string> exchange_records(const std::string& mine) override { return allgather_strings(w_, mine); }
  void average_model_state() override {
    ParamStore& s = wl_.store;
    if (s.state_count == 0 || w_.size == 1) return;
    std::vector<float> host(s.state_count);
    copy_to_host(run_.device, host.data(), state_data(s), sizeof(float) * host.size());
    allreduce_sum_floats(w_, host.data(), host.size());
    const float inv = 1.0f / static_cast<float>(w_.size);
    for (float& v : host) v *= inv;
    copy_to_device(run_.device, state_data(s), host.data(), sizeof(float) * host.size());
  }
  void log_event(const std::string& key, const nlohmann::json& value, const nlohmann::json& metadata) override {
    mllog_event(log_, key, value, metadata);
  }

  // Epochs of steps from the start position, evaluating every eval_every_epochs, at the last
  // epoch, and when stopping; a checkpoint every checkpoint_every epochs.
  void drive_epochs() {
    const int every = wl_.facts.eval_every_epochs;
    for (int epoch = start_.epoch; epoch <= max_epochs() && !stopped_; ++epoch) {
      begin_epoch(epoch);
      for (int64_t b = epoch == start_.epoch ? start_.step_in_epoch : 0; b < steps_this_epoch_; ++b)
        if (!train_step(epoch, b)) break;
      end_epoch(epoch);
      checkpoint_if_stopped_early();  // before the last evaluation: a job near its time limit
      if (epoch % every == 0 || epoch == max_epochs() || stopped_) evaluate(epoch);
      checkpoint_at_epoch_end(epoch);
    }
  }

  ResumePoint resume_point() const override { return {start_.epoch, start_.step_in_epoch}; }

  // The run stopped early by a signal or --max-steps: keep its state to resume from.
  void checkpoint_if_stopped_early() override {
    if (stop_for_checkpoint_ && !success_ && !checkpointed_at_stop_) {
      checkpointed_at_stop_ = true;
      checkpoint();
    }
  }

  void checkpoint_at_epoch_end(int epoch) override {
    if (opts_.checkpoint_every > 0 && epoch % opts_.checkpoint_every == 0 && !stopped_) checkpoint();
  }

  void checkpoint() {
    if (opts_.checkpoint_dir.empty()) return;
    download_store(wl_.store);  // the host mirrors are what the file holds
    download_optimizer(b_.hyper.optimizer);
    const std::string where = save_checkpoint(w_, opts_.checkpoint_dir, checkpoint_key(run_, w_), position_, wl_,
                                              b_.hyper.optimizer);
    spdlog::info("checkpoint after step {}: {}", position_.global_step, where);
  }

  void fill(TrainResult& r) const {
    r.success = success_;
    r.status = success_ ? keys::kSuccess : keys::kAborted;
    r.epochs = epochs_;
    r.final_metric = final_metric_;
    r.steps = step_;
    r.work_unit = wl_.facts.work_unit;
    r.throughput = step_seconds_ > 0 ? work_ / step_seconds_ : 0.0;
    r.comm_share = step_seconds_ > 0 ? comm_seconds_ / step_seconds_ : 0.0;
    r.mean_step_ms = step_ > 0 ? 1000.0 * step_seconds_ / static_cast<double>(step_) : 0.0;
  }

  const std::vector<StepTimes>& step_times() const { return step_times_; }
  double eval_seconds_per_evaluation() const { return evals_ ? eval_seconds_ / evals_ : 0.0; }
  int evals() const { return evals_; }

 private:
  World& w_;
  const ResolvedRun& run_;
  const TrainOptions& opts_;
  BuiltRun& b_;
  Workload& wl_;
  MlLog& log_;
  Trace& trace_;
  std::vector<double> targets_;  // every part's (the metric's alone without parts), the metric's first
  AtomicFile* loss_log_;
  TrainPosition start_;
  int fail_rank_ = -1;
  int64_t fail_step_ = -1;
  int64_t step_ = 0;
  int64_t steps_this_epoch_ = 0;
  TrainPosition position_;
  bool stop_for_checkpoint_ = false;
  bool checkpointed_at_stop_ = false;
  int epochs_ = 0;
  bool stopped_ = false;
  bool success_ = false;
  double final_metric_ = 0.0;
  double step_seconds_ = 0.0, comm_seconds_ = 0.0, work_ = 0.0;
  Clock::time_point last_print_ = Clock::now();
  double window_loss_ = 0.0, window_seconds_ = 0.0, window_work_ = 0.0;
  int64_t window_steps_ = 0;
  static constexpr size_t kMaxStepTimes = 1 << 20;  // 40 MB per rank at most
  std::vector<StepTimes> step_times_;
  double eval_seconds_ = 0.0;  // this rank's, evaluate_everywhere included (the whole evaluation)
  int evals_ = 0;
};

}  // namespace

StepOutcome train_one_step(const World& w, Communicator& comm, Workload& wl, Optimizer& opt, float lr, int epoch,
                           int64_t step, Trace* trace) {
  const bool tracing = trace && trace->enabled();
  const double t0 = MPI_Wtime();
  if (tracing) {
    trace->mark_s = t0;
    trace->first_in_step = true;
  }
  zero_grads(wl.store);
  grads_begin_step(comm);
  GradRouting routing{&comm, &wl.store, trace};
  const StepStats st = wl.train_step(epoch, step, GradReady{&routing, &route_grad_ready});
  const double t_backward_done = MPI_Wtime();
  StepOutcome o;
  grads_finish_step(comm, wl.store, wl.sparse_rows);
  const double t_comm_done = MPI_Wtime();
  o.compute_seconds = t_backward_done - t0;
  o.comm_seconds = t_comm_done - t_backward_done;
  optimizer_step(opt, wl.store, lr);
  // The global mean loss: exact and identical on every rank (so every rank agrees to stop on NaN).
  // The stop flag rides along, so every rank learns of a signal to any rank after the same step.
  // The loss is read only now, behind the optimizer's queued work: on a GPU the step's one wait.
  double sums[4] = {step_loss_sum(st), st.loss_weight, st.work, stop_signal_received() ? 1.0 : 0.0};
  allreduce_sum_doubles(w, sums, 4);
  o.loss = sums[0] / sums[1];
  o.work = sums[2];
  o.stop_requested = sums[3] > 0.0;
  const double t_end = MPI_Wtime();
  o.other_seconds = t_end - t_comm_done;
  const std::vector<CommSpan> spans = take_spans(comm);  // also keeps the span buffer bounded
  if (!spans.empty()) {
    double first = spans[0].start_s, last = spans[0].end_s;
    for (const CommSpan& sp : spans) {
      first = std::min(first, sp.start_s);
      last = std::max(last, sp.end_s);
      o.comm_bytes += static_cast<double>(sp.bytes);
    }
    o.comm_busy_seconds = last - first;
  }
  if (tracing) {
    for (const CommSpan& sp : spans)
      trace_add(*trace, {sp.name + " bucket " + std::to_string(sp.bucket), "comm", sp.start_s, sp.end_s, 1, sp.bytes});
    trace_add(*trace, {"wait for buckets", "comm", t_backward_done, t_comm_done, 0, 0});
    trace_add(*trace, {"optimizer + loss allreduce", "optimizer", t_comm_done, t_end, 0, 0});
    trace_add(*trace, {"step " + std::to_string(trace->steps_traced + 1), "step", t0, t_end, 2, 0});
    ++trace->steps_traced;
  }
  return o;
}

namespace {

void write_step_stats(const World& w, const ResolvedRun& run, const TrainOptions& opts, const TrainResult& r,
                      const Workload& wl, const std::vector<StepTimes>& mine, double eval_s, int evals) {
  int ranks_per_node = w.local_size;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &ranks_per_node, 1, MPI_INT, MPI_MAX, w.comm));
  const auto all = gather_step_times(w, mine);
  if (w.rank != 0) return;
  const StepStatsSummary s =
      summarize_step_times(all, ranks_per_node, warmup_steps_to_skip(static_cast<int64_t>(mine.size())));
  nlohmann::json extra = {{"benchmark", run.entry->spec.name}, {"scale", run.scale},
                          {"device", device_name(run.device)},
                          {"precision", compute_precision_name(run.precision)}, {"status", r.status},
                          {"time_to_train_s", r.time_to_train_s}, {"epochs", r.epochs},
                          {"configured_global_batch", run.run.global_batch}, {"work_unit", r.work_unit},
                          {"grad_bytes", wl.store.grads.size() * sizeof(float)}, {"nodes", w.nodes},
                          {"eval_s", eval_s}, {"evals", evals}, {"eval_samples", wl.facts.eval_samples},
                          {"eval_every_epochs", wl.facts.eval_every_epochs},
                          {"steps_per_epoch", wl.facts.steps_per_epoch}};
  const std::string text = step_stats_json(s, extra.dump());
  write_file_atomically(opts.step_stats, text.data(), text.size());
  spdlog::info("step stats: {} step(s) of {} rank(s) in {}", s.steps, w.size, opts.step_stats);
}

// The run itself. `log`, `built` and `run_started` belong to the caller, so that on a failure they
// are still alive while the caller ends the job.
TrainResult train_and_log(World& w, const ResolvedRun& run, const TrainOptions& opts, MlLog& log, BuiltRun& built,
                          bool& run_started) {
  enable_flush_denormals();
  const bool rank0 = w.rank == 0;
  const auto init_clock = Clock::now();
  const bool open_division = opts.test_target > 0.0;
  const double target = open_division ? opts.test_target : run.target;
  const std::string& benchmark = run.entry->spec.name;

  spdlog::info("mlperf-dist train: benchmark {}, scale {}, {} rank(s) on {} node(s)", benchmark, run.scale, w.size,
               w.nodes);
  std::string config_text = format_config(run.config);
  if (!config_text.empty() && config_text.back() == '\n') config_text.pop_back();
  spdlog::info("resolved config:\n{}", config_text);
  spdlog::info("flush-to-zero and denormals-are-zero: {} on every computing thread",
               denormals_flushed() ? "on" : "NOT available");

  log = open_mllog(rank0, opts.results_dir, opts.system, benchmark, opts.mllog_stdout);
  log_submission(log, run, opts, w, open_division);
  mllog_event(log, keys::kCacheClear, true);
  mllog_start(log, keys::kInitStart);

  CommConfig comm_cfg = opts.comm;
  comm_cfg.record_spans = !opts.trace_path.empty() || !opts.step_stats.empty();
  built = build_run(w, run, comm_cfg);
  Workload& wl = *built.workload;
  if (run.device != Device::cpu) spdlog::info("device: {}", built.device.description);
  Trace trace;
  trace.path = opts.trace_path;
  trace.max_steps = opts.trace_steps;

  mllog_event(log, keys::kMlpdConfig, run.config);
  mllog_event(log, keys::kSeed, run.run.seed);
  mllog_event(log, keys::kGlobalBatchSize, wl.facts.global_batch);
  mllog_event(log, keys::kTrainSamples, wl.facts.train_samples);
  mllog_event(log, keys::kEvalSamples, wl.facts.eval_samples);
  mllog_event(log, keys::kModelBnSpan, wl.facts.bn_span);
  for (const auto& [k, v] : hyperparam_log_entries(built.hyper)) mllog_event(log, k, v);
  for (const LoggedParam& p : wl.facts.logged_params) mllog_event(log, p.key, p.value, p.metadata);
  TrainPosition start;
  if (!opts.resume_dir.empty()) {
    start = load_checkpoint(w, opts.resume_dir, checkpoint_key(run, w), wl, built.hyper.optimizer);
    upload_store(wl.store);
    upload_optimizer(built.hyper.optimizer);
    mllog_event(log, keys::kMlpdResumedFrom,
                {{"dir", opts.resume_dir}, {"global_step", start.global_step}, {"epoch", start.epoch},
                 {"step_in_epoch", start.step_in_epoch}});
    spdlog::info("resumed from {} at step {} (epoch {}, step {} of it): not a valid MLPerf result", opts.resume_dir,
                 start.global_step, start.epoch, start.step_in_epoch);
  }
  const MetricSpec& metric = run.entry->spec.metric;
  spdlog::info("model: {}", wl.facts.model_summary);
  spdlog::info("communication: {}", describe(*built.comm));
  spdlog::info("data: {} train / {} eval samples, {} steps per epoch, bn span {}, target {} {}{:.4f}{}",
               wl.facts.train_samples, wl.facts.eval_samples, wl.facts.steps_per_epoch, wl.facts.bn_span, metric.name,
               metric.higher_is_better ? "" : "<= ", target, open_division ? " (test target: division open)" : "");
  spdlog::info("init: {:.2f} s", seconds_since(init_clock));
  barrier(w);
  mllog_end(log, keys::kInitStop);

  std::optional<AtomicFile> loss_log;
  if (rank0 && !opts.loss_log.empty()) loss_log.emplace(opts.loss_log);

  // ---- the timed region: run_start .. run_stop ----
  barrier(w);
  mllog_start(log, keys::kRunStart);
  run_started = true;
  const auto run_clock = Clock::now();
  trace.origin_s = MPI_Wtime();
  TrainLoop loop(w, run, opts, built, log, trace, target, loss_log ? &*loss_log : nullptr, start);
  if (wl.has_own_driver())
    wl.drive(loop);
  else
    loop.drive_epochs();
  loop.checkpoint_if_stopped_early();
  TrainResult r;
  loop.fill(r);
  log_sparse_embeddings(*built.comm);
  mllog_event(log, keys::kMlpdRunSummary,
              {{"throughput", r.throughput}, {"work_unit", r.work_unit}, {"comm_share", r.comm_share},
               {"mean_step_ms", r.mean_step_ms}, {"steps", r.steps}, {"ranks", w.size}, {"nodes", w.nodes},
               {"device", device_name(run.device)}, {"precision", compute_precision_name(run.precision)},
               {"bf16_gemm", run.precision == Precision::bf16 ? bf16_gemm_kernel(run.device) : "none"},
               {"bf16_conv", run.precision == Precision::bf16 ? bf16_conv_kernel(run.device) : "none"}});
  mllog_end(log, keys::kRunStop, nullptr, {{keys::kStatus, r.status}});
  r.time_to_train_s = seconds_since(run_clock);
  if (loss_log) loss_log->commit();
  r.result_path = close_mllog(log);
  if (!trace.path.empty()) {
    std::vector<std::string> parts = gather_strings(w, trace_events_json(trace, w.rank));
    if (rank0) {
      write_trace_file(trace.path, parts);
      spdlog::info("trace: {} step(s) of {} rank(s) in {}", trace.steps_traced, w.size, trace.path);
    }
  }
  if (!opts.step_stats.empty()) write_step_stats(w, run, opts, r, wl, loop.step_times(), loop.eval_seconds_per_evaluation(), loop.evals());
  download_store(wl.store);
  if (rank0 && !opts.dump_params.empty())
    write_file_atomically(opts.dump_params, wl.store.params.data(), wl.store.params.size() * sizeof(float));
  check_replicas_agree(w, wl.store);
  spdlog::info("{}", format_summary(run, w, r));
  return r;
}

// A failure on this rank ends the run here, while the communicator is still alive: rank 0 logs
// run_stop with status aborted (after run_start: a complete log, never a counted result) or
// removes its log (before run_start: no result at all), then the whole job ends at once
// (MPI_Abort) without unwinding through destructors that would enter a collective and wait for
// ranks that never come.
[[noreturn]] void end_failed_run(const World& w, MlLog& log, bool run_started, const std::string& what, int code) {
  if (log.enabled()) {
    if (run_started) {
      try {
        mllog_end(log, keys::kRunStop, nullptr, {{keys::kStatus, keys::kAborted}});
        const std::string path = close_mllog(log);
        spdlog::error("run aborted; its log (status aborted): {}", path);
      } catch (const std::exception& e) {
        discard_mllog(log);
      }
    } else {
      discard_mllog(log);
    }
  }
  if (w.size > 1) abort_world(w, what, code);
  throw UserError(what, code);
}

}  // namespace

TrainResult run_training(World& w, const ResolvedRun& run, const TrainOptions& opts) {
  MlLog log;
  BuiltRun built;
  bool run_started = false;
  try {
    return train_and_log(w, run, opts, log, built, run_started);
  } catch (const UserError& e) {
    end_failed_run(w, log, run_started, e.what(), e.exit_code);
  } catch (const std::exception& e) {
    end_failed_run(w, log, run_started, std::string("internal error: ") + e.what(), 1);
  }
}

std::string format_summary(const ResolvedRun& run, const World& w, const TrainResult& r) {
  return fmt::format(
      "==== result ====\n"
      "benchmark: {}\n"
      "scale: {}\n"
      "ranks: {} ({} node(s))\n"
      "global batch: {}\n"
      "status: {}\n"
      "time to train: {:.1f} s (run_start to run_stop)\n"
      "epochs: {} ({} steps, {:.1f} ms per step)\n"
      "final metric: {:.4f}\n"
      "throughput: {:.0f} {}/s\n"
      "communication: {:.1f}% of step time\n"
      "result log: {}",
      run.entry->spec.name, run.scale, w.size, w.nodes, run.run.global_batch, r.status, r.time_to_train_s, r.epochs,
      r.steps, r.mean_step_ms, r.final_metric, r.throughput, r.work_unit, 100.0 * r.comm_share,
      r.result_path.empty() ? "(none)" : r.result_path);
}

}  // namespace mlpd
