#include "train/setup.h"

#include "comm/collectives.h"
#include "core/check.h"
#include "mlperf/config.h"
#include "mlperf/keys.h"
#include "mlperf/rules.h"

namespace mlpd {

ResolvedRun resolve_run(const RunRequest& req, int rank, int ranks) {
  ResolvedRun r;
  r.entry = &find_workload(req.benchmark);
  const ScaleSpec& scale = find_scale(r.entry->spec, req.scale);
  r.scale = req.scale;
  r.data_dir = req.data_dir;
  r.target = scale.target;
  r.config = resolve_config(scale.defaults_yaml, req.config_file, req.sets);
  enforce_rules(r.entry->spec, r.scale, r.config, RunShape{ranks});
  if (r.entry->check_config) r.entry->check_config(r.config);
  r.run.seed = r.config.at(keys::kSeed).get<uint64_t>();
  r.run.max_epochs = r.config.at(keys::kMaxEpochs).get<int>();
  r.run.global_batch = r.config.at(keys::kGlobalBatchSize).get<int64_t>();
  r.hyper = read_hyperparams(r.config);
  r.device = req.device;
  r.precision = req.precision;
  // The same answer on every rank of a homogeneous job, before anything is opened.
  if (r.device == Device::cuda && cuda_device_count() == 0)
    throw UserError(std::string("--device cuda: ") +
                        (cuda_ops_built() ? "no GPU is visible on this machine" : "this build has no CUDA"),
                    2);
  if (r.entry->check_data) r.entry->check_data(WorkloadContext{rank, ranks, r.scale, r.data_dir});
  return r;
}

BuiltRun build_run(World& w, const ResolvedRun& run, const CommConfig& comm) {
  BuiltRun b;
  b.device = open_device(run.device, w.local_rank);
  const WorkloadContext ctx{w.rank, w.size, run.scale, run.data_dir, run.device, run.precision};
  b.workload = run.entry->make(ctx, run.config);
  b.workload->init_parameters(run.run.seed);
  broadcast_parameters(w, b.workload->store);
  place_store_on(b.workload->store, run.device);
  b.hyper = run.hyper;
  b.hyper.schedule.steps_per_epoch = b.workload->facts.steps_per_epoch;
  init_optimizer(b.hyper.optimizer, b.workload->store);
  b.comm = make_communicator(w, comm, b.workload->store, b.workload->sparse_rows);
  return b;
}

}  // namespace mlpd
