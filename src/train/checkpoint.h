// Checkpoints: enough to continue a run bit for bit on CPU. Each rank writes its own file
// (parameters and optimizer state are the same on every rank, but batch-norm running statistics
// and a workload's own state are per rank), atomically; after a barrier rank 0 names the complete
// set in DIR/latest (atomically), so a crash mid-write leaves the previous checkpoint in force.
// Boost.Serialization binary archives: the same binary on the same kind of machine resumes.
//
// A checkpoint records the benchmark, scale, a hash of the resolved config and the rank count;
// resuming with any of them different is refused with a clear error (exit 2). A resumed run is
// logged as such and is never a valid MLPerf result (the timed region did not start from scratch).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "comm/world.h"
#include "train/optimizer.h"
#include "workloads/workload.h"

namespace mlpd {

struct TrainPosition {
  int epoch = 1;            // the epoch (1-based) the next step belongs to
  int64_t step_in_epoch = 0;  // the next step within it
  int64_t global_step = 0;  // steps completed
};

struct CheckpointKey {
  std::string benchmark, scale;
  uint64_t config_hash = 0;
  int ranks = 0;
};

// FNV-1a over the config's canonical JSON text: equal configs, equal hashes, on every machine.
uint64_t config_hash(const std::string& config_json);

// Collective over w: every rank writes DIR/step_<N>/rank_<r>.ckpt, then rank 0 updates DIR/latest.
// Returns the checkpoint's directory.
std::string save_checkpoint(const World& w, const std::string& dir, const CheckpointKey& key,
                            const TrainPosition& pos, const Workload& wl, const Optimizer& opt);

// Reads DIR/latest and this rank's file into the workload and optimizer (already built, same
// shapes); returns the position to continue from. UserError (exit 2) on a missing, corrupt or
// mismatched checkpoint.
TrainPosition load_checkpoint(const World& w, const std::string& dir, const CheckpointKey& key, Workload& wl,
                              Optimizer& opt);

}  // namespace mlpd
