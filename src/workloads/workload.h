// What the generic trainer needs from a workload: its parameters, a local training step, a local
// evaluation, and its defaults. Workloads never communicate: the trainer reduces gradients and
// evaluation counts for all of them in one place.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/param_store.h"

namespace mlpd {

struct WorkloadContext {
  int rank = 0;
  int ranks = 1;
  std::string data_dir = "data";
};

struct TrainStepStats {
  double loss_sum = 0.0;  // summed over this rank's samples, unscaled
  int64_t samples = 0;
};

// Partial sums of the quality metric over this rank's share of the eval set: metric = num/den.
// Secondary metrics (e.g. NDCG beside HR@10) are sums over the same denominator, named in
// Workload::extra_metric_names, in that order.
struct EvalCounts {
  double numerator = 0.0;
  double denominator = 0.0;
  std::vector<double> extra;
};

struct Workload {
  std::string benchmark;
  std::string scale;
  std::string metric_name;        // e.g. "top1"
  std::vector<std::string> extra_metric_names;  // reported beside the metric, not a target
  std::string model_summary;
  std::string sample_unit = "samples";  // in throughput figures: "img" for image workloads
  ParamStore store;
  int64_t train_samples = 0;      // whole training set
  int64_t eval_samples = 0;       // whole eval set
  int64_t global_batch = 0;
  int64_t batches_per_epoch = 0;
  int64_t bn_span = 0;            // samples per batch-norm group (MLPerf model_bn_span)
  int eval_every_epochs = 1;
  double flops_per_sample = 0.0;  // forward+backward, for throughput figures

  // Gradients are ADDED to store.grads (the trainer zeroes them); the loss of sample i is scaled
  // by 1/global_batch in the gradient so that the sum over ranks is the mean.
  std::function<TrainStepStats(int epoch, int64_t batch)> train_step;
  std::function<EvalCounts()> evaluate;
  // Set by the trainer: call it (when set) as soon as a parameter view's gradient is final for the
  // step, in reverse view order, so its bucket's allreduce can start while backward goes on.
  std::function<void(size_t view)> grad_ready;
  std::function<void(uint64_t seed)> init_parameters;
  std::shared_ptr<void> state;    // the workload's own data, model and buffers
};

// The embedded default config (YAML) of a workload at a scale; throws UserError when unknown.
const std::string& workload_defaults_yaml(const std::string& benchmark, const std::string& scale);
// Builds the workload for this rank: opens data, builds the model. Outside the timed region.
std::unique_ptr<Workload> make_workload(const std::string& benchmark, const std::string& scale,
                                        const nlohmann::json& config, const WorkloadContext& ctx);
// Path of a workload's prepared dataset under the data directory.
std::string workload_data_path(const std::string& data_dir, const std::string& benchmark, const std::string& scale);

}  // namespace mlpd
