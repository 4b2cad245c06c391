// Backend `hierarchical`: the node step runs in an MPI-3 shared-memory window
// (MPI_Comm_split_type SHARED + MPI_Win_allocate_shared), synchronised with MPI_Ibarrier and
// MPI_Win_sync; there is no hand-rolled transport.
//
// The window is cut into blocks of kBlock elements; block k belongs to local rank k % local_size.
// Because ownership follows the window position (not the job), a job never writes where a
// previous job's result may still be read. One job (data[0,n) living at window[region, region+n)):
//   1. copy in: each rank writes its data for the blocks others own into its own window part
//      (in wire precision); its own blocks stay in its private buffer.          -> Ibarrier
//   2. reduce: each rank sums its blocks across every rank of the node in local-rank order (its
//      own contribution read from its private buffer), writes the result to its private buffer
//      and to its window part. With several nodes this is a chain along the "rail" (the ranks of
//      equal local rank, one per node, in node order): node 0 sums its ranks, node g receives the
//      fp32 partial of nodes 0..g-1 from node g-1, adds its own ranks one at a time and passes it
//      on; node N-1 ends the chain and the result goes round the rail, N-1 -> 0 -> 1 -> ... -> N-2
//      (point to point; each node passes it on as soon as it has it). Ranks lie
//      contiguously by node, so the chain is rank order ((x0 + x1) + x2) + x3, the canonical
//      order (reduce_kernels.h), and the sum does not depend on the node layout. Up to
//      kMaxInflight jobs (chunks) are in the chain at once, so while node g works on one chunk
//      node g-1 works on the next: the chain costs about one chunk's latency per node, then
//      bandwidth (each rank sends and receives its share about twice, as a ring allreduce).
//                                                                               -> Ibarrier
//   3. copy out: each rank reads the blocks others own from their window parts.
// Memory traffic per rank for 2 ranks: ~n/2 written in, n/2 x 2 read + n/2 x 2 written in the
// reduce, n/2 read + written out: each byte of the result crosses the memory bus about 3 times.
//
// Nodes whose ranks are not consecutive (e.g. mpirun --map-by node: ranks 0, 2 on one node, 1, 3
// on the other) cannot chain node by node in rank order: there make_hierarchical_backend returns
// the mpi backend (MPI_Iallgather + the canonical sum over all ranks, on its own communicator),
// still rank order, with the mpi backend's cost; describe() then says mpi.
#include <algorithm>
#include <cstring>

#include "comm/backend.h"
#include "core/check.h"

namespace mlpd {

namespace {

constexpr size_t kBlock = 4096;  // elements
constexpr size_t kMaxInflight = 4;
// Messages on the rail, each kind with its own tag: matched in job order (same source and tag).
constexpr int kChainTag = 7302;   // the partial, node g-1 -> g
constexpr int kResultTag = 7303;  // the result, last node -> 0 -> 1 -> ... -> last-1

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
      // What one rank owns of a job: at most ceil(blocks / local_size) blocks.
      const size_t owned_max = (max_job_ / kBlock / static_cast<size_t>(t.local_size) + 2) * kBlock;
      for (auto& s : rail_) {
        s.send.assign(owned_max, 0.0f);  // this node's partial (or the result, on the last node)
        s.recv.assign(owned_max, 0.0f);  // the partial from the node before, then the result
      }
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
  // Across nodes: kChain: this rank's part of the chain is posted (node 0: its partial sent; the
  // others: the receive of the partial); kResult: the result's send (last node) or receive is
  // posted; kForward: the result is passed on to the next node (where one is waiting for it).
  enum State { kQueued, kCopiedIn, kChain, kResult, kForward, kReduced, kDone };
  struct Job {
    float* data = nullptr;
    size_t n = 0, region = 0;
    State state = kQueued;
    MPI_Request req = MPI_REQUEST_NULL;      // node barriers
    MPI_Request rail_req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};  // chain send; chain receive, then result
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

  bool test(MPI_Request& r) {
    if (r == MPI_REQUEST_NULL) return true;
    int done = 0;
    MPI_CHECK(MPI_Test(&r, &done, MPI_STATUS_IGNORE));
    return done != 0;
  }
  bool test(Job& j) { return test(j.req); }

  // The node's contributions to the piece at job offset i / window position pos, in local-rank
  // order: this rank's own from its private buffer, the others' from their window parts.
  void set_sources(const Job& j, size_t i, size_t pos) {
    for (int q = 0; q < t_.local_size; ++q) {
      srcs_[static_cast<size_t>(q)] = at(q, pos);
      srcs_f32_[static_cast<size_t>(q)] = q == t_.local_rank ? j.data + i : nullptr;
    }
  }

  // This rank's blocks of job j, packed: start (the packed partial of the nodes before; null on
  // node 0) plus this node's ranks in local-rank order, fp32, not rounded. out may alias start.
  void node_chain(const Job& j, const float* start, float* out) {
    size_t k = 0;
    for_pieces(j, [&](size_t i, size_t pos, size_t len, int own) {
      if (own != t_.local_rank) return;
      set_sources(j, i, pos);
      sum_in_order(start ? start + k : nullptr, srcs_.data(), srcs_f32_.data(), t_.local_size, len, p_, out + k);
      k += len;
    });
  }

  void advance(Job& j, State prev) {
    const int me = t_.local_rank;
    if (j.state == kCopiedIn) {
      if (prev < (t_.nodes == 1 ? kReduced : kChain)) return;
      if (!test(j)) return;
      MPI_CHECK(MPI_Win_sync(win_));
      if (t_.nodes == 1) {
        for_pieces(j, [&](size_t i, size_t pos, size_t len, int own) {
          if (own != me) return;
          set_sources(j, i, pos);
          canonical_sum(srcs_.data(), srcs_f32_.data(), t_.local_size, len, p_, j.data + i, at(me, pos));
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
        j.owned = 0;
        for_pieces(j, [&](size_t, size_t, size_t len, int own) {
          if (own == me) j.owned += len;
        });
        const int g = t_.node_index;
        if (g == 0) {  // the chain starts here: this node's ranks, from local rank 0
          node_chain(j, nullptr, rs.send.data());
          MPI_CHECK(MPI_Isend(rs.send.data(), static_cast<int>(j.owned), MPI_FLOAT, 1, kChainTag, t_.rail,
                              &j.rail_req[0]));
        } else {
          MPI_CHECK(MPI_Irecv(rs.recv.data(), static_cast<int>(j.owned), MPI_FLOAT, g - 1, kChainTag, t_.rail,
                              &j.rail_req[1]));
        }
        j.state = kChain;
      }
    }
    if (j.state == kChain) {
      if (prev < kResult) return;
      RailSlot& rs = rail_[j.rail_slot];
      const int g = t_.node_index, last = t_.nodes - 1;
      if (g > 0) {
        if (!test(j.rail_req[1])) return;
        // The partial of ranks before this node, continued with this node's ranks in order.
        node_chain(j, rs.recv.data(), rs.send.data());
        if (g < last)
          MPI_CHECK(MPI_Isend(rs.send.data(), static_cast<int>(j.owned), MPI_FLOAT, g + 1, kChainTag, t_.rail,
                              &j.rail_req[0]));
      }
      // The result goes round the ring last -> 0 -> 1 -> ... -> last-1, point to point: each node
      // receives and sends it once, a message per hop that the progress loop drives (MPI_Ibcast
      // here: 16 MiB across 2 namespace hosts took ~250 ms in both runs, this 60-250 ms).
      if (g == last)
        MPI_CHECK(MPI_Isend(rs.send.data(), static_cast<int>(j.owned), MPI_FLOAT, 0, kResultTag, t_.rail,
                            &j.rail_req[1]));
      else
        MPI_CHECK(MPI_Irecv(rs.recv.data(), static_cast<int>(j.owned), MPI_FLOAT, g == 0 ? last : g - 1, kResultTag,
                            t_.rail, &j.rail_req[1]));
      j.state = kResult;
    }
    if (j.state == kResult) {
      if (prev < kForward) return;
      const int g = t_.node_index, last = t_.nodes - 1;
      if (g + 1 < last) {
        if (!test(j.rail_req[1])) return;
        MPI_CHECK(MPI_Isend(rail_[j.rail_slot].recv.data(), static_cast<int>(j.owned), MPI_FLOAT, g + 1, kResultTag,
                            t_.rail, &j.rail_req[1]));
      }
      j.state = kForward;
    }
    if (j.state == kForward) {
      if (prev < kReduced) return;
      if (!test(j.rail_req[0]) || !test(j.rail_req[1])) return;
      RailSlot& rs = rail_[j.rail_slot];
      float* sum = t_.node_index == t_.nodes - 1 ? rs.send.data() : rs.recv.data();
      round_to_wire(sum, j.owned, p_);
      size_t k = 0;
      for_pieces(j, [&](size_t i, size_t pos, size_t len, int own) {
        if (own != me) return;
        std::memcpy(j.data + i, sum + k, len * 4);
        encode_wire(sum + k, at(me, pos), len, p_);
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

  Topology t_;
  WirePrecision p_;
  size_t eb_, max_job_, window_elems_ = 0;
  MPI_Win win_ = MPI_WIN_NULL;
  MPI_Comm node_b_ = MPI_COMM_NULL;  // second barrier of each job (the first is on t_.node)
  std::vector<char*> bases_;
  std::vector<const void*> srcs_;
  std::vector<const float*> srcs_f32_;
  RailSlot rail_[kMaxInflight];
  JobRing<Job> jobs_;
  uint64_t submitted_ = 0, completed_ = 0, staging_base_ = 0;
};

// Ranks not consecutive per node: the mpi backend, on its own duplicate of the world communicator
// (its MPI_Iallgathers must not interleave with those of another mpi backend, e.g. auto's
// small-bucket one, which may start its jobs at other moments on other ranks).
class RankOrderFallback final : public Backend {
 public:
  RankOrderFallback(const Topology& t, WirePrecision p, size_t max_job) : t_(t) {
    MPI_CHECK(MPI_Comm_dup(t.world, &t_.world));
    inner_ = make_mpi_backend(t_, p, max_job);
  }
  ~RankOrderFallback() override {
    inner_.reset();  // nothing is in flight: the communicator waits for its jobs before this
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&t_.world);
  }
  const char* name() const override { return inner_->name(); }
  uint64_t submit(float* data, size_t n, size_t region) override { return inner_->submit(data, n, region); }
  bool progress() override { return inner_->progress(); }
  uint64_t completed() const override { return inner_->completed(); }
  void flush() override { inner_->flush(); }
  void restart_staging() override { inner_->restart_staging(); }
  size_t max_job() const override { return inner_->max_job(); }
  size_t region_space() const override { return inner_->region_space(); }

 private:
  Topology t_;
  std::unique_ptr<Backend> inner_;
};

}  // namespace

std::unique_ptr<Backend> make_hierarchical_backend(const Topology& t, WirePrecision p, size_t window_elems,
                                                   size_t max_job) {
  // The chain is rank order only where every node holds consecutive ranks (Open MPI's default
  // by-slot mapping; pretend nodes always do). Otherwise: the mpi backend, rank order too. Every
  // rank sees the same t.order, so all take the same branch.
  for (size_t k = 0; k < t.order.size(); ++k)
    if (t.order[k] != static_cast<int>(k)) return std::make_unique<RankOrderFallback>(t, p, max_job);
  return std::make_unique<HierarchicalBackend>(t, p, window_elems, max_job);
}

}  // namespace mlpd
