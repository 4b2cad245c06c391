// Backend `mpi`: each job is one MPI_Iallgather of every rank's contribution (in wire precision)
// followed by the canonical sum, computed identically on every rank. One collective per job, so
// it is the latency-optimal choice for small buckets; its volume is size x n per rank, so large
// buckets go to the hierarchical backend.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "comm/backend.h"
#include "core/check.h"

namespace mlpd {

namespace {
// Spins before a waiting rank yields its core; <0: never. MLPD_COMM_SPINS overrides.
int g_spins_before_yield = -1;
}  // namespace

void set_idle_policy(int ranks_on_node) {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  // One rank per core or fewer: spin like MPI's own blocking calls (yielding hands the core to
  // other jobs for a whole time slice: measured 2x slower on a shared 2-core machine). More
  // ranks than cores: the partner may need this very core, so yield after a short spin.
  g_spins_before_yield = (cpus > 0 && ranks_on_node > cpus) ? 2000 : -1;
  if (const char* e = std::getenv("MLPD_COMM_SPINS")) g_spins_before_yield = std::atoi(e);
}

void idle_wait(int& spins) {
  if (g_spins_before_yield >= 0 && ++spins > g_spins_before_yield) sched_yield();
}

namespace {

constexpr int kSlots = 4;

class MpiBackend final : public Backend {
 public:
  MpiBackend(const Topology& t, WirePrecision p, size_t max_job) : t_(t), p_(p), max_job_(max_job) {
    const size_t eb = wire_bytes(p);
    for (auto& s : slots_) {
      s.send.assign(max_job * eb / 4 + 1, 0.0f);
      s.recv.assign(static_cast<size_t>(t.size) * max_job * eb / 4 + 1, 0.0f);  // touched once, here
    }
    srcs_.resize(static_cast<size_t>(t.size));
    pair_ = t.size == 2 && p == WirePrecision::fp32;
    const char* e = std::getenv("MLPD_COMM_SMALL_BLOCKING");
    blocking_small_ = e ? std::atoi(e) != 0 : true;
  }
  const char* name() const override { return "mpi"; }
  size_t max_job() const override { return max_job_; }
  size_t region_space() const override { return max_job_; }
  uint64_t completed() const override { return completed_; }

  uint64_t submit(float* data, size_t n, size_t /*region*/) override {
    MLPD_CHECK(n <= max_job_, "mpi backend: job larger than its buffers");
    Job& j = jobs_.push();
    j = Job{data, n, -1, MPI_REQUEST_NULL, submitted_};
    ++submitted_;
    progress();
    return j.id;
  }

  bool progress() override {
    // Start queued jobs while a slot is free (in order), then finish completed ones (in order).
    for (size_t i = 0; i < jobs_.size(); ++i) {
      Job& j = jobs_.at(i);
      if (j.slot >= 0) continue;
      int free_slot = -1;
      for (int s = 0; s < kSlots; ++s)
        if (!slots_[s].busy) free_slot = s;
      if (free_slot < 0) break;
      start(j, free_slot);
    }
    while (!jobs_.empty()) {
      Job& j = jobs_.at(0);
      if (j.slot < 0) break;
      int done = 0;
      MPI_CHECK(MPI_Test(&j.req, &done, MPI_STATUS_IGNORE));
      if (!done) break;
      finish(j);
      jobs_.pop();
      ++completed_;
    }
    return jobs_.empty();
  }

 private:
  struct Slot {
    std::vector<float> send, recv;
    bool busy = false;
  };
  struct Job {
    float* data;
    size_t n;
    int slot;
    MPI_Request req;
    uint64_t id;
  };

  void start(Job& j, int s) {
    Slot& sl = slots_[s];
    sl.busy = true;
    j.slot = s;
    if (pair_) {
      // Two ranks in fp32: x0 + x1 == x1 + x0 bit for bit, so MPI's own allreduce is already the
      // canonical sum, at MPI's latency. Blocking: a small job costs less than the Iallreduce
      // machinery would (measured; see comm/README.md).
      if (blocking_small_) {
        // Out of place into the slot, then copied back: Open MPI's in-place allreduce is slower.
        MPI_CHECK(MPI_Allreduce(j.data, sl.recv.data(), static_cast<int>(j.n), MPI_FLOAT, MPI_SUM, t_.world));
        std::memcpy(j.data, sl.recv.data(), j.n * 4);
        j.req = MPI_REQUEST_NULL;
      } else {
        MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, j.data, static_cast<int>(j.n), MPI_FLOAT, MPI_SUM, t_.world, &j.req));
      }
      return;
    }
    encode_wire(j.data, sl.send.data(), j.n, p_);
    MPI_Datatype type = p_ == WirePrecision::fp32 ? MPI_FLOAT : MPI_UINT16_T;
    MPI_CHECK(MPI_Iallgather(sl.send.data(), static_cast<int>(j.n), type, sl.recv.data(), static_cast<int>(j.n), type,
                             t_.world, &j.req));
  }

  void finish(Job& j) {
    Slot& sl = slots_[j.slot];
    if (pair_) {
      sl.busy = false;
      return;
    }
    const size_t eb = wire_bytes(p_);
    const auto* base = reinterpret_cast<const char*>(sl.recv.data());
    for (size_t k = 0; k < t_.order.size(); ++k)
      srcs_[k] = base + static_cast<size_t>(t_.order[k]) * j.n * eb;
    canonical_sum(srcs_.data(), nullptr, t_.size, t_.groups, j.n, p_, j.data, nullptr);
    sl.busy = false;
  }

  Topology t_;
  WirePrecision p_;
  size_t max_job_;
  bool pair_ = false, blocking_small_ = true;
  Slot slots_[kSlots];
  std::vector<const void*> srcs_;
  JobRing<Job> jobs_;
  uint64_t submitted_ = 0, completed_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_mpi_backend(const Topology& t, WirePrecision p, size_t max_job) {
  return std::make_unique<MpiBackend>(t, p, max_job);
}

}  // namespace mlpd
