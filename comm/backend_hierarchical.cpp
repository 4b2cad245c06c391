// Backend `hierarchical`: the node step runs in an MPI-3 shared-memory window
// (MPI_Comm_split_type SHARED + MPI_Win_allocate_shared), synchronised with MPI_Ibarrier and
// MPI_Win_sync; there is no hand-rolled transport.
//
// The window is cut into blocks of kBlock elements; block k belongs to local rank k % local_size.
// Because ownership follows the window position (not the job), a job never writes where a
// previous job's result may still be read. One job (data[0,n) living at window[region, region+n)):
//   1. copy in: each rank writes its data for the blocks others own into its own window part
//      (in wire precision); its own blocks stay in its private buffer.          -> Ibarrier
//   2. reduce: each rank sums its blocks across every rank of the node (the canonical order,
//      its own contribution read from its private buffer), writes the result to its private
//      buffer and to its window part. With several nodes, the node sums of its blocks are then
//      exchanged with the ranks of equal local rank on the other nodes (MPI_Iallgather on the
//      "rail" communicator) and summed in node order.                          -> Ibarrier
//   3. copy out: each rank reads the blocks others own from their window parts.
// Memory traffic per rank for 2 ranks: ~n/2 written in, n/2 x 2 read + n/2 x 2 written in the
// reduce, n/2 read + written out: each byte of the result crosses the memory bus about 3 times.
#include <algorithm>
#include <cstring>

#include "comm/backend.h"
#include "core/check.h"

namespace mlpd {

namespace {

constexpr size_t kBlock = 4096;  // elements
constexpr size_t kMaxInflight = 4;

class HierarchicalBackend final : public Backend {
 public:
  HierarchicalBackend(const Topology& t, WirePrecision p, size_t window_elems, size_t max_job)
      : t_(t), p_(p), eb_(wire_bytes(p)), max_job_(max_job) {
    MLPD_CHECK(t.uniform, "hierarchical backend needs the same number of ranks on every node");
    max_job_ = (max_job_ + kBlock - 1) / kBlock * kBlock;  // regions start on block boundaries
    window_elems_ = std::max(window_elems, kMaxInflight * max_job_);
    MPI_Info info;
    MPI_CHECK(MPI_Info_create(&info));
    MPI_CHECK(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
    void* mine = nullptr;
    // +64 to align each part to a cache line (Open MPI aligns shared segments to 8 bytes only).
    MPI_CHECK(MPI_Win_allocate_shared(static_cast<MPI_Aint>(window_elems_ * eb_ + 64), 1, info, t.node, &mine, &win_));
    MPI_CHECK(MPI_Info_free(&info));
    bases_.resize(static_cast<size_t>(t.local_size));
    for (int q = 0; q < t.local_size; ++q) {
      MPI_Aint sz = 0;
      int disp = 0;
      void* b = nullptr;
      MPI_CHECK(MPI_Win_shared_query(win_, q, &sz, &disp, &b));
      bases_[static_cast<size_t>(q)] = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(b) + 63) & ~uintptr_t{63});
    }
    std::memset(bases_[static_cast<size_t>(t.local_rank)], 0, window_elems_ * eb_);  // first touch here, by the owner, once
    MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, win_));
    MPI_CHECK(MPI_Comm_dup(t.node, &node_b_));
    srcs_.resize(static_cast<size_t>(t.local_size));
    srcs_f32_.resize(static_cast<size_t>(t.local_size));
    if (t.nodes > 1) {
      size_t owned_max = max_job / static_cast<size_t>(t.local_size) + 2 * kBlock;
      for (auto& s : rail_) {
        s.send.assign(owned_max, 0.0f);
        s.recv.assign(owned_max * static_cast<size_t>(t.nodes), 0.0f);
      }
      rail_srcs_.resize(static_cast<size_t>(t.nodes));
    }
  }
  ~HierarchicalBackend() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    while (!progress()) {
    }
    MPI_Win_unlock_all(win_);
    MPI_Win_free(&win_);
    MPI_Comm_free(&node_b_);
  }

  const char* name() const override { return "hierarchical"; }
  size_t max_job() const override { return max_job_; }
  size_t region_space() const override { return window_elems_; }
  uint64_t completed() const override { return completed_; }

  uint64_t submit(float* data, size_t n, size_t /*region*/) override {
    // Jobs take the window's regions in turn: a small window (kMaxInflight x max_job per rank)
    // stays in the last-level cache, so what one rank copies in, another reads from cache.
    const size_t region = ((submitted_ - staging_base_) % kMaxInflight) * max_job_;
    MLPD_CHECK(n <= max_job_ && region + n <= window_elems_, "hierarchical backend: job outside its window");
    Job& j = jobs_.push();
    j = Job{};
    j.data = data;
    j.n = n;
    j.region = region;
    j.id = submitted_++;
    progress();
    return j.id;
  }

  // Safe: another rank reads or writes our window for our job j only after it has begun its own
  // job j (the job's first barrier), and it begins the first job after a restart only once all its
  // earlier jobs are complete; every rank restarts at the same point, so regions stay consistent.
  void restart_staging() override {
    MLPD_CHECK(jobs_.empty(), "hierarchical backend: staging restarted with jobs in flight");
    staging_base_ = submitted_;
  }

  bool progress() override {
    // Non-blocking collectives are matched by call order, so every phase posts on its own
    // communicator and a job may enter a phase only after the job before it has (same order on
    // every rank, whatever the timing).
    size_t inflight = 0;
    State prev = kDone;
    for (size_t i = 0; i < jobs_.size(); ++i) {
      Job& j = jobs_.at(i);
      if (j.state == kQueued) {
        if (inflight >= kMaxInflight || conflicts(i)) break;  // start strictly in order
        start(j, static_cast<int>(i));
      }
      advance(j, prev);
      if (j.state != kDone) ++inflight;
      prev = j.state;
    }
    while (!jobs_.empty() && jobs_.at(0).state == kDone) {
      jobs_.pop();
      ++completed_;
    }
    return jobs_.empty();
  }

 private:
  enum State { kQueued, kCopiedIn, kRail, kReduced, kDone };
  struct Job {
    float* data = nullptr;
    size_t n = 0, region = 0;
    State state = kQueued;
    MPI_Request req = MPI_REQUEST_NULL;
    int rail_slot = -1;
    size_t owned = 0;  // elements this rank owns in the job
    uint64_t id = 0;
  };
  struct RailSlot {
    std::vector<float> send, recv;
    bool busy = false;
  };

  int owner(size_t pos) const { return static_cast<int>((pos / kBlock) % static_cast<size_t>(t_.local_size)); }

  // Calls f(job_offset, window_pos, length, owner) for each block piece of the job.
  template <typename F>
  void for_pieces(const Job& j, F&& f) const {
    size_t i = 0;
    while (i < j.n) {
      size_t pos = j.region + i;
      size_t len = std::min(j.n - i, kBlock - pos % kBlock);
      f(i, pos, len, owner(pos));
      i += len;
    }
  }

  bool conflicts(size_t idx) {
    Job& j = jobs_.at(idx);
    for (size_t i = 0; i < idx; ++i) {
      Job& o = jobs_.at(i);
      if (o.state == kDone || o.state == kQueued) continue;
      if (o.region < j.region + j.n && j.region < o.region + o.n) return true;
    }
    return false;
  }

  char* at(int q, size_t pos) const { return bases_[static_cast<size_t>(q)] + pos * eb_; }

  void start(Job& j, int /*idx*/) {
    const int me = t_.local_rank;
    if (t_.local_size > 1) {
      for_pieces(j, [&](size_t i, size_t pos, size_t len, int own) {
        if (own != me) encode_wire(j.data + i, at(me, pos), len, p_);
      });
      MPI_CHECK(MPI_Win_sync(win_));
      MPI_CHECK(MPI_Ibarrier(t_.node, &j.req));
    }
    j.state = kCopiedIn;
  }

  bool test(Job& j) {
    if (j.req == MPI_REQUEST_NULL) return true;
    int done = 0;
    MPI_CHECK(MPI_Test(&j.req, &done, MPI_STATUS_IGNORE));
    return done != 0;
  }

  void advance(Job& j, State prev) {
    const int me = t_.local_rank;
    if (j.state == kCopiedIn) {
      if (prev < (t_.nodes == 1 ? kReduced : kRail)) return;
      if (!test(j)) return;
      MPI_CHECK(MPI_Win_sync(win_));
      if (t_.nodes == 1) {
        for_pieces(j, [&](size_t i, size_t pos, size_t len, int own) {
          if (own != me) return;
          for (int q = 0; q < t_.local_size; ++q) {
            srcs_[static_cast<size_t>(q)] = at(q, pos);
            srcs_f32_[static_cast<size_t>(q)] = q == me ? j.data + i : nullptr;
          }
          canonical_sum(srcs_.data(), srcs_f32_.data(), t_.local_size, one_group_, len, p_, j.data + i, at(me, pos));
        });
        finish_reduce(j);
      } else {
        int slot = -1;
        for (int s = 0; s < static_cast<int>(kMaxInflight); ++s)
          if (!rail_[s].busy) slot = s;
        if (slot < 0) return;  // all rail slots busy: try again on the next progress
        RailSlot& rs = rail_[slot];
        rs.busy = true;
        j.rail_slot = slot;
        size_t k = 0;
        // Node sums, unrounded fp32 (inputs rounded to the wire precision), packed.
        for_pieces(j, [&](size_t i, size_t pos, size_t len, int own) {
          if (own != me) return;
          for (int q = 0; q < t_.local_size; ++q) {
            srcs_[static_cast<size_t>(q)] = at(q, pos);
            srcs_f32_[static_cast<size_t>(q)] = q == me ? j.data + i : nullptr;
          }
          node_sum(len, rs.send.data() + k);
          k += len;
        });
        j.owned = k;
        MPI_CHECK(MPI_Iallgather(rs.send.data(), static_cast<int>(k), MPI_FLOAT, rs.recv.data(), static_cast<int>(k),
                                 MPI_FLOAT, t_.rail, &j.req));
        j.state = kRail;
      }
    }
    if (j.state == kRail) {
      if (prev < kReduced) return;
      if (!test(j)) return;
      RailSlot& rs = rail_[j.rail_slot];
      for (int g = 0; g < t_.nodes; ++g) rail_srcs_[static_cast<size_t>(g)] = rs.recv.data() + static_cast<size_t>(g) * j.owned;
      // Sum across nodes in node order (fp32), into send (free now), then round and scatter back.
      canonical_sum(rail_srcs_.data(), nullptr, t_.nodes, one_group_, j.owned, WirePrecision::fp32, rs.send.data(),
                    nullptr);
      round_to_wire(rs.send.data(), j.owned, p_);
      size_t k = 0;
      for_pieces(j, [&](size_t i, size_t pos, size_t len, int own) {
        if (own != me) return;
        std::memcpy(j.data + i, rs.send.data() + k, len * 4);
        encode_wire(rs.send.data() + k, at(me, pos), len, p_);
        k += len;
      });
      rs.busy = false;
      finish_reduce(j);
    }
    if (j.state == kReduced) {
      if (!test(j)) return;
      MPI_CHECK(MPI_Win_sync(win_));
      for_pieces(j, [&](size_t i, size_t pos, size_t len, int own) {
        if (own != me) decode_wire(at(own, pos), j.data + i, len, p_);
      });
      j.state = kDone;
    }
  }

  void finish_reduce(Job& j) {
    if (t_.local_size > 1) {
      MPI_CHECK(MPI_Win_sync(win_));
      MPI_CHECK(MPI_Ibarrier(node_b_, &j.req));
    }
    j.state = kReduced;
  }

  // fp32 node sum of srcs_/srcs_f32_ (inputs rounded to the wire precision, output not).
  void node_sum(size_t len, float* out) {
    alignas(64) float tmp[1024];
    for (size_t off = 0; off < len; off += 1024) {
      size_t m = std::min<size_t>(1024, len - off);
      for (int q = 0; q < t_.local_size; ++q) {
        const float* x;
        if (srcs_f32_[static_cast<size_t>(q)]) {
          std::memcpy(tmp, srcs_f32_[static_cast<size_t>(q)] + off, m * 4);
          round_to_wire(tmp, m, p_);
          x = tmp;
        } else {
          decode_wire(static_cast<const char*>(srcs_[static_cast<size_t>(q)]) + off * eb_, tmp, m, p_);
          x = tmp;
        }
        if (q == 0) std::memcpy(out + off, x, m * 4);
        else
          for (size_t e = 0; e < m; ++e) out[off + e] += x[e];
      }
    }
  }

  Topology t_;
  WirePrecision p_;
  size_t eb_, max_job_, window_elems_ = 0;
  MPI_Win win_ = MPI_WIN_NULL;
  MPI_Comm node_b_ = MPI_COMM_NULL;  // second barrier of each job (the first is on t_.node)
  std::vector<char*> bases_;
  std::vector<const void*> srcs_;
  std::vector<const float*> srcs_f32_;
  std::vector<const void*> rail_srcs_;
  std::vector<int> one_group_{0};
  RailSlot rail_[kMaxInflight];
  JobRing<Job> jobs_;
  uint64_t submitted_ = 0, completed_ = 0, staging_base_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_hierarchical_backend(const Topology& t, WirePrecision p, size_t window_elems,
                                                   size_t max_job) {
  return std::make_unique<HierarchicalBackend>(t, p, window_elems, max_job);
}

}  // namespace mlpd
