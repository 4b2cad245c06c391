// Backend `mpi`: each job is one MPI_Iallgather of every rank's contribution (in wire precision)
// followed by the canonical sum (rank order), computed identically on every rank. One collective
// per job, so it is the latency-optimal choice for small buckets; its volume is size x n per rank,
// so large buckets go to the hierarchical backend.
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
// Open MPI's shared-memory (vader) eager limit is 4096 bytes including its headers: pieces of
// 4000 bytes stay eager. Up to 9 of them (below 32 KiB) beat one rendezvous message (measured).
constexpr size_t kEagerPieceFloats = 1000;
constexpr int kMaxEagerPieces = 9;  // covers jobs below 32 KiB
constexpr int kPairTag = 7301;

void add_into(float* __restrict x, const float* __restrict y, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] += y[i];
}

class MpiBackend final : public Backend {
 public:
  MpiBackend(const Topology& t, WirePrecision p, size_t max_job) : t_(t), p_(p), max_job_(max_job) {
    const size_t eb = wire_bytes(p);
    pair_ = t.size == 2 && p == WirePrecision::fp32;
    // Pair jobs complete inside start(): one slot, and only a receive buffer of one job.
    nslots_ = pair_ ? 1 : kSlots;
    for (int k = 0; k < nslots_; ++k) {
      Slot& s = slots_[k];
      if (!pair_) s.send.assign(max_job * eb / 4 + 1, 0.0f);
      s.recv.assign((pair_ ? 1 : static_cast<size_t>(t.size)) * max_job * eb / 4 + 1, 0.0f);  // touched once, here
    }
    srcs_.resize(static_cast<size_t>(t.size));
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
      for (int s = 0; s < nslots_; ++s)
        if (!slots_[s].busy) free_slot = s;
      if (free_slot < 0) break;
      start(j, free_slot);
    }
    while (!jobs_.empty()) {
      Job& j = jobs_.at(0);
      if (j.slot < 0) break;
      int done = 1;  // a blocking pair job has no request: skip the call into MPI
      if (j.req != MPI_REQUEST_NULL) MPI_CHECK(MPI_Test(&j.req, &done, MPI_STATUS_IGNORE));
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
    j.req = MPI_REQUEST_NULL;
    if (pair_) {
      // Two ranks in fp32: x0 + x1 == x1 + x0 bit for bit, so "exchange, then add" on each rank
      // and MPI's own allreduce both give the canonical sum. Blocking: a small job costs less than
      // the non-blocking machinery would (measured; see comm/README.md).
      const int peer = 1 - t_.rank;
      const int pieces = static_cast<int>((j.n + kEagerPieceFloats - 1) / kEagerPieceFloats);
      if (pieces <= kMaxEagerPieces) {
        // Within Open MPI's shared-memory eager limit per message: one exchange (or a few of
        // eager size, which beats one rendezvous message) and a local add; skips the coll
        // framework that MPI_Allreduce goes through.
        if (pieces == 1) {
          MPI_CHECK(MPI_Sendrecv(j.data, static_cast<int>(j.n), MPI_FLOAT, peer, kPairTag, sl.recv.data(),
                                 static_cast<int>(j.n), MPI_FLOAT, peer, kPairTag, t_.world, MPI_STATUS_IGNORE));
        } else {
          MPI_Request* r = piece_reqs_;
          for (int k = 0; k < pieces; ++k) {
            const size_t off = static_cast<size_t>(k) * kEagerPieceFloats, m = std::min(kEagerPieceFloats, j.n - off);
            MPI_CHECK(MPI_Irecv(sl.recv.data() + off, static_cast<int>(m), MPI_FLOAT, peer, kPairTag, t_.world, &r[k]));
          }
          for (int k = 0; k < pieces; ++k) {
            const size_t off = static_cast<size_t>(k) * kEagerPieceFloats, m = std::min(kEagerPieceFloats, j.n - off);
            MPI_CHECK(MPI_Isend(j.data + off, static_cast<int>(m), MPI_FLOAT, peer, kPairTag, t_.world, &r[pieces + k]));
          }
          MPI_CHECK(MPI_Waitall(2 * pieces, r, MPI_STATUSES_IGNORE));
        }
        add_into(j.data, sl.recv.data(), j.n);
      } else if (blocking_small_) {
        // Out of place into the slot, then copied back: Open MPI's in-place allreduce is slower.
        MPI_CHECK(MPI_Allreduce(j.data, sl.recv.data(), static_cast<int>(j.n), MPI_FLOAT, MPI_SUM, t_.world));
        std::memcpy(j.data, sl.recv.data(), j.n * 4);
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
    // The gathered contributions lie in rank order: the canonical order, whatever the nodes.
    for (size_t r = 0; r < srcs_.size(); ++r) srcs_[r] = base + r * j.n * eb;
    canonical_sum(srcs_.data(), nullptr, t_.size, j.n, p_, j.data, nullptr);
    sl.busy = false;
  }

  Topology t_;
  WirePrecision p_;
  size_t max_job_;
  bool pair_ = false, blocking_small_ = true;
  int nslots_ = kSlots;
  Slot slots_[kSlots];
  std::vector<const void*> srcs_;
  MPI_Request piece_reqs_[2 * kMaxEagerPieces];
  JobRing<Job> jobs_;
  uint64_t submitted_ = 0, completed_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_mpi_backend(const Topology& t, WirePrecision p, size_t max_job) {
  return std::make_unique<MpiBackend>(t, p, max_job);
}

}  // namespace mlpd
