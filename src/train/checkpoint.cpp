#include "train/checkpoint.h"

#include <boost/serialization/string.hpp>
#include <boost/serialization/vector.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "comm/collectives.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "core/read_file.h"
#include "core/serialize.h"

namespace mlpd {

namespace {

constexpr uint32_t kFormat = 1;

struct CheckpointFile {
  uint32_t format = kFormat;
  std::string benchmark, scale;
  uint64_t config_hash = 0;
  int ranks = 0, rank = 0;
  int epoch = 0;
  int64_t step_in_epoch = 0, global_step = 0;
  std::vector<float> params, state, velocity, second_moment;
  int64_t optimizer_steps = 0;
  std::string workload_state;
  template <class A>
  void serialize(A& ar, unsigned) {
    ar & format & benchmark & scale & config_hash & ranks & rank & epoch & step_in_epoch & global_step & params &
        state & velocity & second_moment & optimizer_steps & workload_state;
  }
};

std::string rank_file(const std::string& step_dir, int rank) {
  return step_dir + "/rank_" + std::to_string(rank) + ".ckpt";
}

}  // namespace

uint64_t config_hash(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string save_checkpoint(const World& w, const std::string& dir, const CheckpointKey& key,
                            const TrainPosition& pos, const Workload& wl, const Optimizer& opt) {
  const std::string step_dir = dir + "/step_" + std::to_string(pos.global_step);
  CheckpointFile f;
  f.benchmark = key.benchmark;
  f.scale = key.scale;
  f.config_hash = key.config_hash;
  f.ranks = key.ranks;
  f.rank = w.rank;
  f.epoch = pos.epoch;
  f.step_in_epoch = pos.step_in_epoch;
  f.global_step = pos.global_step;
  f.params = wl.store.params;
  f.state = wl.store.state;
  f.velocity = opt.velocity;
  f.second_moment = opt.second_moment;
  f.optimizer_steps = opt.steps;
  f.workload_state = wl.save_state();
  const std::string bytes = to_bytes(f);
  // Every rank reports whether its file is written before rank 0 names the set.
  double failed = 0.0;
  std::string why;
  try {
    write_file_atomically(rank_file(step_dir, w.rank), bytes.data(), bytes.size());
  } catch (const UserError& e) {
    failed = 1.0;
    why = e.what();
  }
  if (allreduce_max(w, failed) > 0.0) {
    if (!why.empty()) throw UserError("checkpoint not written: " + why);
    throw UserError("checkpoint not written: another rank failed to write its file");
  }
  if (w.rank == 0) {
    const std::string name = "step_" + std::to_string(pos.global_step) + "\n";
    write_file_atomically(dir + "/latest", name.data(), name.size());
  }
  barrier(w);
  return step_dir;
}

TrainPosition load_checkpoint(const World& w, const std::string& dir, const CheckpointKey& key, Workload& wl,
                              Optimizer& opt) {
  std::string latest = read_whole_file(dir + "/latest", "checkpoint");
  while (!latest.empty() && (latest.back() == '\n' || latest.back() == '\r')) latest.pop_back();
  if (latest.rfind("step_", 0) != 0 || latest.find('/') != std::string::npos)
    throw UserError("checkpoint: " + dir + "/latest does not name a checkpoint", 2);
  const std::string path = rank_file(dir + "/" + latest, w.rank);
  CheckpointFile f;
  try {
    f = from_bytes<CheckpointFile>(read_whole_file(path, "checkpoint"));
  } catch (const UserError& e) {
    throw UserError("checkpoint " + path + ": " + e.what(), 2);
  }
  auto refuse = [&](const std::string& what) {
    throw UserError("checkpoint " + path + " is from " + what + "; resume with the same configuration", 2);
  };
  if (f.format != kFormat) refuse("another format version");
  if (f.benchmark != key.benchmark || f.scale != key.scale) refuse(f.benchmark + " at scale " + f.scale);
  if (f.ranks != key.ranks) refuse(std::to_string(f.ranks) + " ranks, not " + std::to_string(key.ranks));
  if (f.rank != w.rank) refuse("rank " + std::to_string(f.rank));
  if (f.config_hash != key.config_hash) refuse("a different config (hyperparameters, seed or batch)");
  if (f.params.size() != wl.store.params.size() || f.state.size() != wl.store.state.size() ||
      f.velocity.size() != opt.velocity.size() || f.second_moment.size() != opt.second_moment.size())
    refuse("a model of another shape");
  wl.store.params = std::move(f.params);
  wl.store.state = std::move(f.state);
  opt.velocity = std::move(f.velocity);
  opt.second_moment = std::move(f.second_moment);
  opt.steps = f.optimizer_steps;
  wl.load_state(f.workload_state);
  return {f.epoch, f.step_in_epoch, f.global_step};
}

}  // namespace mlpd
