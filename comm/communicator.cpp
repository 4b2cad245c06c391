// Bucketing ("what is ready to reduce") and scheduling; the backends ("how") are in backend_*.cpp.
#include "comm/communicator.h"

#include <algorithm>
#include <cstdio>

#include "comm/backend.h"
#include "comm/sparse_exchange.h"
#include "comm/watchdog.h"
#include "core/check.h"
#include "kernels/device.h"

namespace mlpd {

namespace comm_detail {

constexpr size_t kMaxSpans = 16384;
constexpr size_t kMpiMaxJob = 262144;  // elements per MPI_Iallgather job (1 MiB in fp32)

struct Bucket {
  size_t offset = 0, count = 0, lo = 0, hi = 0;  // elements; views lo..hi (forward indices)
  int nviews = 0, ready = 0;
  bool started = false, done = false;
  Backend* be = nullptr;
  uint64_t last_job = 0;  // done when be->completed() > last_job
  uint64_t watch = 0;
  double t0 = 0;
};

struct Pending {  // an allreduce_sum in flight
  bool active = false;
  Backend* be = nullptr;
  uint64_t last_job = 0, watch = 0;
  double t0 = 0;
  size_t bytes = 0;
};

std::string mb(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, bytes < 1e6 ? "%.3g" : "%.1f", bytes / 1e6);
  return b;
}

}  // namespace comm_detail
using namespace comm_detail;

class Communicator {
 public:
  World* w = nullptr;
  CommConfig cfg;
  bool device = false;  // the store's gradients are on the GPU: device jobs (nccl), no host waits in a step
  WirePrecision prec = WirePrecision::fp32;
  Topology topo;
  std::unique_ptr<Backend> small_be, large_be;  // the same object may serve both (large_be empty)
  size_t small_bytes = 0;
  double bucket_mb = 0, first_mb = 0;
  std::vector<Bucket> bkts;  // [0, n_main): buckets of the dense views; then the sparse views' buckets
  size_t n_main = 0;
  std::vector<int> view_bucket;
  SparseExchange sparse;     // tables empty: every view is reduced in the buckets, always
  size_t sparse_given = 0;   // sparse views the store has (exchanged sparsely or not)
  size_t next_start = 0;
  int in_flight = 0;  // buckets and flat allreduces submitted and not yet retired
  bool in_step = false;
  Pending flat;
  std::vector<CommSpan> spans;
  size_t spans_dropped = 0;

  Backend* small() { return small_be.get(); }
  Backend* large() { return large_be ? large_be.get() : small_be.get(); }
  Backend* for_bytes(size_t bytes) {
    if (!small_be) return nullptr;
    return bytes < small_bytes ? small() : large();
  }

  ~Communicator() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    if (small_be) wait_all();
    small_be.reset();
    large_be.reset();
    for (MPI_Comm* c : {&sparse.comm, &topo.rail, &topo.node, &topo.world})
      if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  }

  // Clock reads only when spans are recorded: on a small bucket they are a visible part of the cost.
  double now() const { return cfg.record_spans ? MPI_Wtime() : 0.0; }
  void span(const char* name, int bucket, double t0, size_t bytes) {
    if (!cfg.record_spans) return;
    const double t1 = MPI_Wtime();
    if (spans.size() >= kMaxSpans) {
      ++spans_dropped;
      return;
    }
    spans.push_back(CommSpan{name, bucket, t0, t1, bytes});
  }

  // Submits [data, data+n) as jobs of at most the backend's size; returns the last job id.
  uint64_t submit(Backend* be, float* data, size_t n, size_t region_base, bool alternate) {
    uint64_t last = 0;
    const size_t mj = be->max_job();
    size_t k = 0;
    for (size_t off = 0; off < n; off += mj, ++k) {
      size_t m = std::min(mj, n - off);
      size_t region = alternate ? ((2 * mj <= be->region_space()) ? (k % 2) * mj : 0) : region_base + off;
      last = be->submit(data + off, m, region);
    }
    return last;
  }

  void start_bucket(ParamStore& s, size_t b) {
    Bucket& k = bkts[b];
    k.started = true;
    k.t0 = now();
    k.be = for_bytes(k.count * 4);
    if (!k.be) {  // one rank: nothing to reduce
      k.done = true;
      span("allreduce", static_cast<int>(b), k.t0, k.count * 4);
      return;
    }
    k.watch = watch_begin("allreduce_gradients", static_cast<int>(b));
    if (device)  // in place on the GPU, after the gradients queued so far on the compute stream
      k.last_job = k.be->submit_device(grads_data(s) + k.offset, k.count);
    else
      k.last_job = submit(k.be, s.grads.data() + k.offset, k.count, k.offset, false);
    ++in_flight;
  }

  // The dense views' buckets; the sparse views' buckets start only on a dense step (finish_sparse).
  void start_ready(ParamStore& s, bool all) {
    while (next_start < n_main && (all || bkts[next_start].ready == bkts[next_start].nviews))
      start_bucket(s, next_start++);
  }

  // Advances every backend; retires finished buckets and the pending flat allreduce.
  bool progress_all() {
    // Nothing in flight means every submitted job has completed: skip the backends (a step of
    // small buckets calls this several times, and each call is a visible part of their cost).
    if (in_flight == 0) return true;
    bool idle = true;
    if (small_be) idle = small_be->progress() && idle;
    if (large_be) idle = large_be->progress() && idle;
    for (size_t b = 0; b < bkts.size(); ++b) {
      Bucket& k = bkts[b];
      if (!k.started || k.done) continue;
      if (k.be->completed() > k.last_job) {
        k.done = true;
        --in_flight;
        watch_end(k.watch);
        span("allreduce", static_cast<int>(b), k.t0, k.count * 4);
      }
    }
    if (flat.active && flat.be->completed() > flat.last_job) {
      flat.active = false;
      --in_flight;
      watch_end(flat.watch);
      span("allreduce_sum", -1, flat.t0, flat.bytes);
    }
    return idle;
  }

  void restart_staging() {
    if (small_be) small_be->restart_staging();
    if (large_be) large_be->restart_staging();
  }

  void wait_all() {
    if (in_flight == 0) return;
    if (small_be) small_be->flush();
    if (large_be) large_be->flush();
    int spins = 0;
    while (!progress_all()) idle_wait(spins);
  }

  // wait_all where a step's buckets may be left from grads_finish_step. On the GPU they left the
  // watchdog when grads_finish_step returned (so a long host phase after a step, e.g. an
  // evaluation, is no false hang): this host wait is watched as one collective instead, begun on
  // every rank whether or not anything is left (the watchdog's sequence numbers line up).
  void wait_step() {
    if (!device || !small_be) return wait_all();
    WatchScope watch("allreduce_gradients (GPU)");
    wait_all();
  }

  // Device path, at grads_finish_step: the buckets still in flight leave the watchdog (their
  // submission was watched); they retire, without a watch, at a later progress or wait.
  void hand_to_gpu() {
    for (Bucket& k : bkts)
      if (k.started && !k.done && k.watch) {
        watch_end(k.watch);
        k.watch = 0;  // watch_end(0) is a no-op when it retires
      }
  }
};

void destroy_communicator(Communicator* c) { delete c; }

namespace {

void check_store(const Communicator& c, const ParamStore& s, const char* where) {
  MLPD_CHECK(on_device(s) == c.device && s.views.size() == c.view_bucket.size(),
             std::string(where) + ": not the store (views, device) the communicator was made for");
}

void build_topology(Communicator& c) {
  World& w = *c.w;
  Topology& t = c.topo;
  MPI_CHECK(MPI_Comm_dup(w.comm, &t.world));
  t.rank = w.rank;
  t.size = w.size;
  if (c.cfg.ranks_per_node > 0) {
    MPI_CHECK(MPI_Comm_split(t.world, w.rank / c.cfg.ranks_per_node, w.rank, &t.node));
  } else {
    MPI_CHECK(MPI_Comm_split_type(t.world, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &t.node));
  }
  MPI_CHECK(MPI_Comm_rank(t.node, &t.local_rank));
  MPI_CHECK(MPI_Comm_size(t.node, &t.local_size));
  // Node index = order of the nodes' lowest world ranks.
  int leader = w.rank;
  MPI_CHECK(MPI_Bcast(&leader, 1, MPI_INT, 0, t.node));
  std::vector<int> leaders(static_cast<size_t>(t.size)), locals(static_cast<size_t>(t.size));
  MPI_CHECK(MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, t.world));
  MPI_CHECK(MPI_Allgather(&t.local_rank, 1, MPI_INT, locals.data(), 1, MPI_INT, t.world));
  std::vector<int> node_leaders;
  for (int r = 0; r < t.size; ++r)
    if (leaders[static_cast<size_t>(r)] == r) node_leaders.push_back(r);
  t.nodes = static_cast<int>(node_leaders.size());
  t.order.clear();
  t.groups.clear();
  for (int g = 0; g < t.nodes; ++g) {
    t.groups.push_back(static_cast<int>(t.order.size()));
    int count = 0;
    for (int r = 0; r < t.size; ++r)  // ranks of a node in world order == local-rank order (key = rank)
      if (leaders[static_cast<size_t>(r)] == node_leaders[static_cast<size_t>(g)]) {
        t.order.push_back(r);
        ++count;
      }
    if (count != t.local_size) t.uniform = false;
    if (node_leaders[static_cast<size_t>(g)] == leader) t.node_index = g;
  }
  int uniform = t.uniform ? 1 : 0, all_uniform = 0;
  MPI_CHECK(MPI_Allreduce(&uniform, &all_uniform, 1, MPI_INT, MPI_MIN, t.world));
  t.uniform = all_uniform != 0;
  MPI_CHECK(MPI_Comm_split(t.world, t.local_rank, t.node_index, &t.rail));
}

}  // namespace

std::unique_ptr<Communicator> make_communicator(World& w, const CommConfig& cfg, const ParamStore& store,
                                                const std::vector<SparseRows>& sparse) {
  auto c = std::unique_ptr<Communicator>(new Communicator);
  c->w = &w;
  c->cfg = cfg;
  c->prec = parse_precision(cfg.precision);
  set_comm_timeout(cfg.timeout_s);
  const std::string& be = cfg.backend;
  if (be != "auto" && be != "mpi" && be != "hierarchical" && be != "nccl")
    throw UserError("unknown communication backend '" + be + "' (expected auto, mpi, hierarchical or nccl)");
  c->device = on_device(store);
  if (c->device && be != "auto" && be != "nccl")
    throw UserError("communication backend '" + be + "' reduces host buffers, but the gradients are on the GPU (" +
                    std::string(device_name(store.device)) + "): use auto or nccl");
  if (c->device && c->prec != WirePrecision::fp32)
    throw UserError("gradient precision '" + cfg.precision +
                    "': gradients on the GPU are reduced by NCCL in fp32 only");
  const bool gpu = be == "nccl" || c->device;
  c->bucket_mb = cfg.bucket_mb > 0 ? cfg.bucket_mb : (gpu ? kDefaultGpuBucketMb : kDefaultBucketMb);
  c->first_mb = cfg.first_bucket_mb > 0 ? cfg.first_bucket_mb : std::min(kDefaultFirstBucketMb, c->bucket_mb);
  c->small_bytes = static_cast<size_t>((cfg.small_kb > 0 ? cfg.small_kb : kDefaultSmallKb) * 1024);
  const size_t chunk = std::max<size_t>(4096, static_cast<size_t>((cfg.chunk_kb > 0 ? cfg.chunk_kb : kDefaultChunkKb) * 256));

  // Sparse views: exchanged as touched rows on the host at more than one rank, unless off.
  const size_t nv = store.views.size();
  c->sparse.mode = parse_sparse_mode(cfg.sparse_embeddings);
  c->sparse_given = sparse.size();
  std::vector<char> is_sparse(nv, 0);
  for (const SparseRows& r : sparse) {
    MLPD_CHECK(r.view < nv && !is_sparse[r.view] && r.width > 0 && store.views[r.view].count % r.width == 0,
               "make_communicator: a sparse view is out of range, given twice, or not whole rows");
    is_sparse[r.view] = 1;
  }
  if (c->device && c->sparse.mode == SparseMode::on && !sparse.empty())
    throw UserError("sparse embedding exchange is host only: the gradients are on the GPU (" +
                        std::string(device_name(store.device)) + "); use auto or off",
                    2);
  if (c->sparse.mode != SparseMode::off && !c->device && w.size > 1) {
    for (const SparseRows& r : sparse) {
      const ParamView& v = store.views[r.view];
      c->sparse.tables.push_back({r.view, v.offset, v.count, r.width});
      c->sparse.dense_bytes += v.count * 4;
    }
  } else {
    std::fill(is_sparse.begin(), is_sparse.end(), 0);  // every view in the buckets, as without sparse views
  }

  // Buckets: views in reverse order; the first bucket is small so communication starts early. The
  // sparse views' buckets (a dense step's path for them) come after all others, never mixed in.
  c->view_bucket.assign(nv, -1);
  auto build = [&](char sparse_pass) {
    for (size_t i = nv; i > 0;) {
      if (is_sparse[i - 1] != sparse_pass) {
        --i;
        continue;
      }
      Bucket k;
      k.hi = i - 1;
      const double cap = (c->bkts.empty() ? c->first_mb : c->bucket_mb) * 1e6;
      size_t lo = i - 1;
      while (lo > 0 && is_sparse[lo - 1] == sparse_pass) {
        size_t end = store.views[k.hi].offset + store.views[k.hi].count;
        if (static_cast<double>(end - store.views[lo - 1].offset) * 4 > cap) break;
        --lo;
      }
      k.lo = lo;
      k.offset = store.views[lo].offset;
      k.count = store.views[k.hi].offset + store.views[k.hi].count - k.offset;
      k.nviews = static_cast<int>(k.hi - k.lo + 1);
      for (size_t v = lo; v <= k.hi; ++v) c->view_bucket[v] = static_cast<int>(c->bkts.size());
      c->bkts.push_back(k);
      i = lo;
    }
  };
  build(0);
  c->n_main = c->bkts.size();
  build(1);
  c->spans.reserve(1024);

  // At one rank there is nothing to sum, and auto builds no backend. A backend named nccl is built
  // even so: a one-rank allreduce is a copy, but the buckets, events and stream waits all run, which
  // is what an overlap measurement on one GPU needs.
  if (w.size > 1 || be == "nccl") {
    build_topology(*c);
    set_idle_policy(w.local_size);
    if (!c->sparse.tables.empty()) MPI_CHECK(MPI_Comm_dup(c->topo.world, &c->sparse.comm));
    const size_t grads = std::max<size_t>(store.param_count, 1);  // store.grads is empty on the GPU
    if (gpu) {
      c->small_be = make_nccl_backend(w, c->topo, c->prec, std::max(grads, chunk));
      c->small_bytes = 0;
    } else if (be == "mpi") {
      c->small_be = make_mpi_backend(c->topo, c->prec, kMpiMaxJob);
      c->small_bytes = 0;
    } else if (be == "hierarchical" || !c->topo.uniform) {
      if (!c->topo.uniform && be == "hierarchical")
        throw UserError("hierarchical backend: nodes have different numbers of ranks; use --backend mpi");
      if (c->topo.uniform) {
        c->small_be = make_hierarchical_backend(c->topo, c->prec, 0, chunk);
        c->small_bytes = 0;
      } else {
        c->small_be = make_mpi_backend(c->topo, c->prec, kMpiMaxJob);
        c->small_bytes = 0;
      }
    } else {  // auto
      if (cfg.small_kb <= 0 && c->topo.size == 2 && c->prec == WirePrecision::fp32)
        c->small_bytes = static_cast<size_t>(kDefaultPairSmallKb * 1024);
      c->small_be = make_mpi_backend(c->topo, c->prec, std::max<size_t>(c->small_bytes / 4, 1));
      c->large_be = make_hierarchical_backend(c->topo, c->prec, 0, chunk);
    }
  }
  return c;
}

void grads_begin_step(Communicator& c) {
  c.wait_step();  // nothing from a previous step may still use the buffers
  c.restart_staging();
  for (Bucket& k : c.bkts) {
    k.ready = 0;
    k.started = k.done = false;
  }
  c.next_start = 0;
  c.in_step = true;
}

void grad_ready(Communicator& c, ParamStore& s, size_t view) {
  MLPD_CHECK(view < c.view_bucket.size(), "grad_ready: view index out of range");
  if (c.device) check_store(c, s, "grad_ready");
  Bucket& k = c.bkts[static_cast<size_t>(c.view_bucket[view])];
  MLPD_CHECK(k.ready < k.nviews, "grad_ready: a view was signalled twice in one step (or grads_begin_step is missing)");
  ++k.ready;
  if (c.cfg.overlap) c.start_ready(s, false);
  c.progress_all();
}

namespace {

// After the dense buckets are done (a blocking collective while another rank still needed this
// rank's progress on a bucket could hang): the sparse views, by rows or as their buckets.
void finish_sparse(Communicator& c, ParamStore& s, const std::vector<SparseRows>& touched) {
  bool by_rows = false;
  const double before = c.sparse.gathered_bytes;  // the choice counts this step's bytes
  {
    WatchScope watch("sparse_gradients (counts)");
    by_rows = sparse_step_chosen(c.sparse, c.topo, touched);
  }
  if (by_rows) {
    const double t0 = c.now();
    {
      WatchScope watch("sparse_gradients");
      sparse_exchange(c.sparse, c.topo, c.prec, s.grads.data(), touched);
    }
    c.span("sparse_gradients", -1, t0, static_cast<size_t>(c.sparse.gathered_bytes - before));
  } else {
    for (size_t b = c.n_main; b < c.bkts.size(); ++b) c.start_bucket(s, b);
    c.wait_all();
  }
}

}  // namespace

void grads_finish_step(Communicator& c, ParamStore& s, const std::vector<SparseRows>& touched) {
  if (c.device) check_store(c, s, "grads_finish_step");
  c.start_ready(s, true);  // buckets never signalled (or overlap off) start now, in order
  if (c.device) {
    // No host wait: the compute stream waits for the last bucket (NCCL completes in order), so the
    // optimizer queued next sees the sums. The buckets retire at a later progress or wait.
    c.progress_all();
    if (c.small_be) c.small_be->compute_wait();
    c.hand_to_gpu();
  } else {
    c.wait_all();
    if (!c.sparse.tables.empty()) finish_sparse(c, s, touched);
  }
  c.in_step = false;
}

bool comm_progress(Communicator& c) { return c.progress_all(); }

void allreduce_sum_start(Communicator& c, float* data, size_t n) {
  c.wait_step();
  c.restart_staging();
  Backend* be = c.for_bytes(n * 4);
  if (!be || n == 0) return;
  c.flat.active = true;
  c.flat.be = be;
  c.flat.t0 = c.now();
  c.flat.bytes = n * 4;
  c.flat.watch = watch_begin("allreduce_sum");
  c.flat.last_job = c.submit(be, data, n, 0, true);
  ++c.in_flight;
}

void allreduce_sum_wait(Communicator& c) { c.wait_all(); }

void allreduce_sum(Communicator& c, float* data, size_t n) {
  allreduce_sum_start(c, data, n);
  c.wait_all();
}

void allreduce_sum_device(Communicator& c, float* data, size_t n) {
  MLPD_CHECK(c.device || c.cfg.backend == "nccl",
             "allreduce_sum_device: the communicator reduces host buffers (its store is on the CPU)");
  Backend* be = c.for_bytes(n * 4);
  if (!be || n == 0) return;
  // Not tracked as in flight: nothing on the host waits for it (the compute stream does), and NCCL
  // completes in order, so the buckets' and later jobs' completion covers it. Watched while the
  // host submits (NCCL may connect to its peers on first use).
  const double t0 = c.now();
  WatchScope watch("allreduce_sum");
  be->progress();  // retires finished jobs first, so the backend's event ring stays short
  be->submit_device(data, n);
  be->compute_wait();
  c.span("allreduce_sum (queued)", -1, t0, n * 4);
}

std::vector<CommSpan> take_spans(Communicator& c) {
  c.spans_dropped = 0;
  if (c.spans.empty()) return {};  // keeps the reserved buffer: no allocation in a step without spans
  std::vector<CommSpan> out;
  out.swap(c.spans);
  c.spans.reserve(1024);
  return out;
}

std::string backend_for_bytes(const Communicator& c, size_t bytes) {
  auto& m = const_cast<Communicator&>(c);
  Backend* be = m.for_bytes(bytes);
  return be ? be->name() : "none";
}

SparseStats sparse_stats(const Communicator& c) {
  SparseStats st;
  st.mode = sparse_mode_name(c.sparse.mode);
  st.active = !c.sparse.tables.empty();
  st.views = c.sparse_given;
  if (!st.active && st.views > 0)
    st.inactive_why = c.sparse.mode == SparseMode::off ? "off: dense in the buckets"
                      : c.device                        ? "host only: gradients on the GPU, dense in NCCL buckets"
                                                        : "1 rank: nothing to exchange";
  st.dense_bytes = c.sparse.dense_bytes;
  st.sparse_steps = c.sparse.sparse_steps;
  st.dense_steps = c.sparse.dense_steps;
  st.gathered_bytes = c.sparse.gathered_bytes;
  return st;
}

std::vector<BucketInfo> buckets(const Communicator& c) {
  std::vector<BucketInfo> out;
  for (const Bucket& k : c.bkts) out.push_back({k.offset, k.count, k.lo, k.hi, backend_for_bytes(c, k.count * 4)});
  return out;
}

std::string describe(const Communicator& c) {
  std::string s = "comm: backend " + c.cfg.backend;
  if (!c.small_be) {
    s += " (1 rank: none)";
  } else if (c.large_be) {
    s += " (" + std::string(c.small_be->name()) + " below " + std::to_string(c.small_bytes / 1024) + " KiB, " +
         c.large_be->name() + " above)";
  } else {
    s += " (" + std::string(c.small_be->name()) + ")";
  }
  if (c.small_be)
    s += ", " + std::to_string(c.topo.nodes) + " node(s) x " + std::to_string(c.topo.local_size) + " ranks";
  if (c.device) s += ", gradients on the GPU";
  const size_t nb = c.n_main;
  s += ", " + std::to_string(nb) + " buckets [";
  for (size_t b = 0; b < nb; ++b) {
    if (b) s += " ";
    if (b == 6 && nb > 8) {
      s += "... " + mb(static_cast<double>(c.bkts[nb - 1].count) * 4);
      break;
    }
    s += mb(static_cast<double>(c.bkts[b].count) * 4);
  }
  s += "] MB (first " + mb(c.first_mb * 1e6) + ", cap " + mb(c.bucket_mb * 1e6) + "), precision " +
       precision_name(c.prec) + ", overlap " + (c.cfg.overlap ? "on" : "off") + ", timeout " +
       std::to_string(static_cast<int>(comm_timeout())) + " s";
  if (!c.sparse.tables.empty())
    s += ", sparse embeddings " + std::string(sparse_mode_name(c.sparse.mode)) + " (" +
         std::to_string(c.sparse.tables.size()) + " views, " + mb(static_cast<double>(c.sparse.dense_bytes)) +
         " MB dense: the rows a step touched" + (c.sparse.mode == SparseMode::on ? "" : " when cheaper") + ", else " +
         std::to_string(c.bkts.size() - c.n_main) + " buckets)";
  else if (c.sparse_given > 0)
    s += ", sparse embeddings " + std::string(sparse_mode_name(c.sparse.mode)) + ": not used (" +
         sparse_stats(c).inactive_why + ")";
  return s;
}

}  // namespace mlpd
