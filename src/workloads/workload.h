// The contract between the generic trainer and a workload. A workload is one folder,
// src/workloads/<name>/, and one entry in the list of registry.cpp (see registry.h); this header
// is all the rest of the program knows of it.
//
// Training: each step the workload adds this rank's gradients into store.grads (the trainer zeroes
// them first), scaling sample i's loss by 1/global_batch so the sum over ranks is the mean, and
// calls `ready(view)` as soon as a view's gradient is final (reverse view order) so its bucket's
// allreduce overlaps the rest of backward. Batches may vary in size; the step reports where its loss
// ops added its loss sum (on its device: StepLoss), the weight that loss is averaged over (samples,
// tokens), and its work in the workload's unit.
//
// Evaluation: a rank returns a partial of one of two kinds (WorkloadFacts::eval_kind):
//   sums    - doubles reduced by allreduce (top-1 counts, HR@10, BLEU n-gram counts and lengths);
//   records - bytes (Boost.Serialization, see core/serialize.h) gathered to rank 0 (COCO
//             detections, game outcomes).
// finish_evaluation turns the combined partial into the metric and its secondary metrics: on every
// rank for sums, on rank 0 only for records (the trainer then broadcasts the outcome).
//
// Workloads never communicate: the trainer owns the one allreduce path and the one evaluation path.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/param_store.h"
#include "core/precision.h"
#include "core/sparse_rows.h"
#include "workloads/step_loss.h"

namespace mlpd {

struct WorkloadContext {
  int rank = 0;
  int ranks = 1;
  std::string scale = "mini";
  std::string data_dir = "data";
  Device device = Device::cpu;  // where the model runs (kernels/device.h); the store starts on the host
  Precision precision = Precision::fp32;  // --precision (core/precision.h)
};

// Called by backward when view `view`'s gradient is final. A plain function and context pointer:
// no allocation inside the step.
struct GradReady {
  void* ctx = nullptr;
  void (*fn)(void* ctx, size_t view) = nullptr;
  void operator()(size_t view) const {
    if (fn) fn(ctx, view);
  }
};

struct StepStats {
  // The step's loss, summed over this rank's share, unscaled, where the loss ops added it (on the
  // workload's device; step_loss.h): read_step_loss gives the sum. Null: no loss (a step of nothing).
  const StepLoss* loss = nullptr;
  double loss_weight = 0.0;  // what the loss sum is a sum over (samples, tokens): loss = sum / weight
  double work = 0.0;         // in WorkloadFacts::work_unit, for throughput
};

// The step's loss sum (a wait on a GPU): what the trainer reads once per step.
inline double step_loss_sum(const StepStats& st) { return st.loss ? read_step_loss(*st.loss) : 0.0; }

enum class EvalKind { Sums, Records };

struct EvalPartial {
  std::vector<double> sums;  // EvalKind::Sums: reduced elementwise across ranks
  std::string records;       // EvalKind::Records: this rank's serialized records
};

struct EvalCombined {
  std::vector<double> sums;                 // the allreduced sums
  std::vector<std::string> records_by_rank; // rank 0: every rank's records, in rank order
};

struct EvalOutcome {
  double metric = 0.0;
  std::vector<double> secondary;  // in the order of MetricSpec::secondary
  double samples = 0.0;           // how many eval samples the metric covers
};

// A run parameter the workload logs itself (max_sequence_length with its method), once, with the
// others before run_start.
struct LoggedParam {
  std::string key;
  nlohmann::json value;
  nlohmann::json metadata;  // an object or null
};

// What the trainer and the log need to know of a built workload.
struct WorkloadFacts {
  std::string model_summary;
  std::string work_unit = "samples";  // throughput unit: "img", "tokens", "positions"
  int64_t train_samples = 0;          // logged train_samples / eval_samples
  int64_t eval_samples = 0;
  int64_t global_batch = 0;           // logged global_batch_size
  int64_t bn_span = 0;                // logged model_bn_span
  int64_t steps_per_epoch = 0;        // nominal: what LR schedules count epochs in
  int eval_every_epochs = 1;
  double flops_per_sample = 0.0;      // forward+backward, for throughput figures
  // Memory this rank's model holds on its device, for bench_train (0: the workload does not say).
  int64_t activation_bytes = 0;       // activation and gradient buffers
  int64_t scratch_bytes = 0;          // its Arena
  EvalKind eval_kind = EvalKind::Sums;
  std::vector<LoggedParam> logged_params;
};

class LoopServices;

// Where a driver starts: epoch 1, step 0 for a new run; a checkpoint's position on --resume
// (epoch 1-based; step_in_epoch > 0: that epoch's data is already in the restored state).
struct ResumePoint {
  int epoch = 1;
  int64_t step_in_epoch = 0;
};

// One workload on one rank. Owns its data, model and buffers; its parameters and gradients live
// in `store` (one flat buffer each; layers hold views).
struct Workload {
  virtual ~Workload() = default;
  ParamStore store;
  WorkloadFacts facts;
  // Optional: the views whose gradient is non-zero only in the rows a step touched (embedding
  // tables), set at build (view, width); train_step fills each one's `rows` with this rank's
  // touched rows, ascending and unique, before it returns. The trainer may then exchange only
  // those rows (comm/sparse_exchange.h), bit for bit the dense sum. Empty: every view is dense.
  std::vector<SparseRows> sparse_rows;

  virtual void init_parameters(uint64_t seed) = 0;
  // Steps in epoch `epoch` (0-based): the workload defines its epoch (samples, tokens, games).
  virtual int64_t steps_in_epoch(int epoch) { return epoch >= 0 ? facts.steps_per_epoch : 0; }
  virtual StepStats train_step(int epoch, int64_t step, GradReady ready) = 0;
  virtual EvalPartial evaluate() = 0;
  virtual EvalOutcome finish_evaluation(const EvalCombined& combined) = 0;
  // A workload whose outer loop is not "epochs of steps" (minigo: self-play generations, then
  // training) drives the run itself through the trainer's services; the default is epochs.
  // Whatever a checkpoint needs beyond parameters, batch-norm state and the optimizer (a replay
  // buffer, an RNG position): bytes this rank's checkpoint carries. Data order is a function of
  // (seed, epoch, step) in resnet and ncf, so they have nothing more.
  virtual std::string save_state() const { return {}; }
  virtual void load_state(const std::string& /*bytes*/) {}
  virtual bool has_own_driver() const { return false; }
  virtual void drive(LoopServices& /*loop*/) {}
};

// What a workload's own driver may do: the trainer's one training step (allreduce, optimizer,
// progress, loss log, NaN and --max-steps handling) and its one evaluation (combine, MLLOG,
// target). Implemented by the trainer.
class LoopServices {
 public:
  virtual ~LoopServices() = default;
  virtual void begin_epoch(int epoch) = 0;       // 1-based, as MLLOG's epoch_num
  virtual bool train_step(int epoch, int64_t step) = 0;  // false: the run must stop now
  virtual void end_epoch(int epoch) = 0;
  virtual bool evaluate(int epoch) = 0;          // true: the quality target is reached
  virtual int max_epochs() const = 0;
  virtual bool stopped() const = 0;              // target reached, NaN, or --max-steps
  // Every rank's bytes on every rank, in rank order (minigo: each generation's self-play games,
  // which every rank samples its training positions from). Collective: all ranks call it.
  virtual std::vector<std::string> exchange_records(const std::string& mine) = 0;
  // Every rank's non-trained state (batch-norm running statistics) replaced by the mean over the
  // ranks: the parameters are the same everywhere, and after this the whole model is (minigo: the
  // model every rank plays the next generation with). Collective: all ranks call it.
  virtual void average_model_state() = 0;
  // An MLLOG event of the driver's own (minigo: the games of each generation, save_model), written
  // by rank 0 with its epoch_num in the metadata. Collective in nothing: every rank may call it.
  virtual void log_event(const std::string& key, const nlohmann::json& value, const nlohmann::json& metadata) = 0;
  // Checkpoints (--checkpoint-dir), collective: the driver calls these where the restored state
  // plus resume_point() continue the run bit for bit. After an epoch's steps, before anything
  // changes the state (a stop by signal or --max-steps is saved here); after an epoch's evaluation
  // (every --checkpoint-every epochs).
  virtual ResumePoint resume_point() const = 0;
  virtual void checkpoint_if_stopped_early() = 0;
  virtual void checkpoint_at_epoch_end(int epoch) = 0;
};

}  // namespace mlpd
