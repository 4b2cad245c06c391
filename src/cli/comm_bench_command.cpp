// mlperf-dist comm-bench: collective bandwidth in the manner of nccl-tests. Every size is timed
// and then checked against its exactly-known result (#wrong). algbw = bytes / time; busbw scales
// algbw by the op's bus factor (allreduce 2(n-1)/n, reduce_scatter and allgather (n-1)/n,
// broadcast 1) so it compares with the link's (here: memory's) bandwidth whatever n is.
#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "comm/collectives.h"
#include "comm/communicator.h"
#include "comm/watchdog.h"
#include "comm/world.h"
#include "core/check.h"
#ifdef MLPD_HAVE_NCCL
#include "comm/cuda/nccl_comm.h"
#endif

namespace mlpd::cli {

namespace {

size_t parse_size(const std::string& s) {
  if (s.empty()) throw UserError("empty size");
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (...) {
    throw UserError("bad size '" + s + "' (expected e.g. 8, 64K, 256M, 1G)");
  }
  std::string suf = s.substr(pos);
  double mul = 1;
  if (suf == "K" || suf == "k") mul = 1024.0;
  else if (suf == "M" || suf == "m") mul = 1024.0 * 1024;
  else if (suf == "G" || suf == "g") mul = 1024.0 * 1024 * 1024;
  else if (!suf.empty() && suf != "B" && suf != "b") throw UserError("bad size suffix in '" + s + "' (K, M or G)");
  if (v < 0) throw UserError("negative size '" + s + "'");
  return static_cast<size_t>(v * mul);
}

std::string human(size_t bytes) {
  char b[32];
  if (bytes >= (1u << 30) && bytes % (1u << 30) == 0) std::snprintf(b, sizeof b, "%zuG", bytes >> 30);
  else if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) std::snprintf(b, sizeof b, "%zuM", bytes >> 20);
  else if (bytes >= 1024 && bytes % 1024 == 0) std::snprintf(b, sizeof b, "%zuK", bytes >> 10);
  else std::snprintf(b, sizeof b, "%zu", bytes);
  return b;
}

// Input of rank r at element i: (r+1) * v(i): small integers, exact in fp32, bf16 and fp16 and in
// every summation order, so the expected result is known exactly.
inline float v_of(size_t i) { return static_cast<float>(i % 5 + 1); }

// Single-core copy bandwidth (bytes copied per second), buffers touched first. Median of 5.
double measure_copy_gbps() {
  const size_t n = 64u << 20;
  std::vector<char> a(n, 1), b(n, 2);
  std::vector<double> t;
  for (int k = 0; k < 6; ++k) {
    double t0 = MPI_Wtime();
    std::memcpy(b.data(), a.data(), n);
    double t1 = MPI_Wtime();
    a[static_cast<size_t>(k)] = b[static_cast<size_t>(k) + 1];  // keep the copies observable
    if (k > 0) t.push_back(t1 - t0);
  }
  std::sort(t.begin(), t.end());
  return static_cast<double>(n) / t[t.size() / 2] / 1e9;
}

// A compute kernel of a given length: dependent FMAs on registers, calibrated once.
struct Compute {
  double per_us = 100;  // loop iterations per microsecond
  volatile double sink = 0;
  void run(double iters) {
    double x = 1.0, y = 1.0000001;
    for (long i = 0; i < static_cast<long>(iters); ++i) x = x * y + 1e-12;
    sink = x;
  }
  void calibrate() {
    double t0 = MPI_Wtime();
    run(2e6);
    double dt = MPI_Wtime() - t0;
    per_us = 2e6 / (dt * 1e6);
  }
};

struct Row {
  size_t bytes = 0, count = 0;
  double time_us = 0, algbw = 0, busbw = 0;
  long long wrong = 0;
  double t_cpu_us = -1, t_total_us = -1, overlap_pct = -1;
  double time_mean_us = 0;
};

// Per-iteration times -> each iteration's slowest rank -> the median (and the mean).
double median_of_max(const World& w, std::vector<double> v, double* mean = nullptr) {
  if (w.size > 1) {
    WatchScope watch("allreduce_max");
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_MAX, w.comm));
  }
  if (mean) {
    *mean = 0;
    for (double x : v) *mean += x / static_cast<double>(v.size());
  }
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

double bus_factor(const std::string& op, int p) {
  if (p <= 1) return op == "broadcast" ? 1.0 : 0.0 + (op == "allreduce" ? 0.0 : 0.0);
  if (op == "allreduce") return 2.0 * (p - 1) / p;
  if (op == "reduce_scatter" || op == "allgather") return static_cast<double>(p - 1) / p;
  return 1.0;
}

// One benchmark "engine": fills its buffers, runs the op once, checks the result.
struct Engine {
  virtual ~Engine() = default;
  virtual void fill() = 0;                // untimed: (re)writes the inputs
  virtual void run() = 0;                 // timed
  virtual long long check() = 0;          // wrong elements on this rank
  virtual void start() { run(); }         // overlap mode: start, progress between slices, wait
  virtual void progress() {}
  virtual void wait() {}
  virtual bool overlappable() const { return false; }
  // Bucketed engines interleave the compute with grad_ready (a backward); others slice it.
  virtual void overlapped(Compute& cpu, double iters) {
    start();
    const int slices = 32;
    for (int s = 0; s < slices; ++s) {
      cpu.run(iters / slices);
      progress();
    }
    wait();
  }
};

// Plain MPI collectives, out of place, buffers allocated once per size.
struct MpiEngine : Engine {
  const World& w;
  std::string op;
  size_t count;  // elements in the larger buffer
  std::vector<float> send, recv;
  MPI_Request req = MPI_REQUEST_NULL;
  MpiEngine(const World& w_, std::string op_, size_t count_) : w(w_), op(std::move(op_)), count(count_) {
    send.assign(count, 0.0f);
    recv.assign(count, 0.0f);
  }
  size_t per_rank() const { return count / static_cast<size_t>(w.size); }
  void fill() override {
    if (op == "allgather") {
      size_t m = per_rank();
      for (size_t i = 0; i < m; ++i) send[i] = static_cast<float>(w.rank + 1) * v_of(static_cast<size_t>(w.rank) * m + i);
    } else if (op == "broadcast") {
      for (size_t i = 0; i < count; ++i) send[i] = w.rank == 0 ? v_of(i) : -1.0f;
    } else {
      for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>(w.rank + 1) * v_of(i);
    }
  }
  void run() override {
    WatchScope watch(op.c_str());
    if (op == "allreduce") {
      MPI_CHECK(MPI_Allreduce(send.data(), recv.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, w.comm));
    } else if (op == "broadcast") {
      MPI_CHECK(MPI_Bcast(send.data(), static_cast<int>(count), MPI_FLOAT, 0, w.comm));
    } else if (op == "reduce_scatter") {
      MPI_CHECK(MPI_Reduce_scatter_block(send.data(), recv.data(), static_cast<int>(per_rank()), MPI_FLOAT, MPI_SUM,
                                         w.comm));
    } else {
      MPI_CHECK(MPI_Allgather(send.data(), static_cast<int>(per_rank()), MPI_FLOAT, recv.data(),
                              static_cast<int>(per_rank()), MPI_FLOAT, w.comm));
    }
  }
  bool overlappable() const override { return op == "allreduce"; }
  void start() override {
    MPI_CHECK(MPI_Iallreduce(send.data(), recv.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, w.comm, &req));
  }
  void progress() override {
    int done = 0;
    if (req != MPI_REQUEST_NULL) MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
  }
  void wait() override { MPI_CHECK(MPI_Wait(&req, MPI_STATUS_IGNORE)); }
  long long check() override {
    const float tri = static_cast<float>(w.size * (w.size + 1) / 2);
    long long bad = 0;
    if (op == "allreduce") {
      for (size_t i = 0; i < count; ++i) bad += recv[i] != tri * v_of(i);
    } else if (op == "broadcast") {
      for (size_t i = 0; i < count; ++i) bad += send[i] != v_of(i);
    } else if (op == "reduce_scatter") {
      size_t m = per_rank(), base = static_cast<size_t>(w.rank) * m;
      for (size_t i = 0; i < m; ++i) bad += recv[i] != tri * v_of(base + i);
    } else {
      size_t m = per_rank();
      for (size_t i = 0; i < m * static_cast<size_t>(w.size); ++i)
        bad += recv[i] != static_cast<float>(i / m + 1) * v_of(i);
    }
    return bad;
  }
};

// The communicator: one buffer through the chosen backend, or (bucketed) exactly the trainer's
// step: a flat gradient buffer cut into views, bucketed, signalled in reverse order.
struct CommEngine : Engine {
  const World& w;
  bool bucketed;
  size_t count;
  ParamStore store;
  std::unique_ptr<Communicator> comm;
  std::vector<float> data;
  CommEngine(World& w_, const CommConfig& cfg, size_t count_, bool bucketed_)
      : w(w_), bucketed(bucketed_), count(count_) {
    if (bucketed) {
      // Views of 256 KiB (a mid-size layer), forward order, 16-float multiples: no padding.
      const size_t view = 65536;
      for (size_t off = 0, k = 0; off < count; off += view, ++k) {
        char name[32];
        std::snprintf(name, sizeof name, "v%zu", k);
        add_param(store, name, std::min(view, count - off), ParamKind::weight);
      }
      finalize_params(store);
    }
    comm = make_communicator(w_, cfg, store);
    if (!bucketed) data.assign(count, 0.0f);
  }
  float* buf() { return bucketed ? store.grads.data() : data.data(); }
  void fill() override {
    float* b = buf();
    const float r = static_cast<float>(w.rank + 1);
    for (size_t i = 0; i < count; ++i) b[i] = r * v_of(i);
  }
  void run() override {
    if (bucketed) {
      grads_begin_step(*comm);
      for (size_t v = store.views.size(); v > 0; --v) grad_ready(*comm, store, v - 1);
      grads_finish_step(*comm, store);
    } else {
      allreduce_sum(*comm, data.data(), count);
    }
  }
  bool overlappable() const override { return true; }
  void start() override { allreduce_sum_start(*comm, data.data(), count); }
  void progress() override { comm_progress(*comm); }
  void wait() override { allreduce_sum_wait(*comm); }
  void overlapped(Compute& cpu, double iters) override {
    if (!bucketed) return Engine::overlapped(cpu, iters);
    // A backward: one slice of compute per view, then grad_ready (views in reverse order).
    grads_begin_step(*comm);
    const size_t nv = store.views.size();
    for (size_t v = nv; v > 0; --v) {
      cpu.run(iters / static_cast<double>(nv));
      grad_ready(*comm, store, v - 1);
    }
    grads_finish_step(*comm, store);
  }
  long long check() override {
    const float tri = static_cast<float>(w.size * (w.size + 1) / 2);
    const float* b = buf();
    long long bad = 0;
    for (size_t i = 0; i < count; ++i) bad += b[i] != tri * v_of(i);
    return bad;
  }
};

#ifdef MLPD_HAVE_NCCL
struct NcclEngine : Engine {
  const World& w;
  std::string op;
  size_t count;
  nccl::Ctx* ctx;
  float *dsend = nullptr, *drecv = nullptr;
  std::vector<float> host;
  NcclEngine(const World& w_, nccl::Ctx* c, std::string op_, size_t count_)
      : w(w_), op(std::move(op_)), count(count_), ctx(c) {
    dsend = static_cast<float*>(nccl::device_alloc(count * 4));
    drecv = static_cast<float*>(nccl::device_alloc(count * 4));
    host.assign(count, 0.0f);
  }
  ~NcclEngine() override {
    nccl::device_free(dsend);
    nccl::device_free(drecv);
  }
  size_t per_rank() const { return count / static_cast<size_t>(w.size); }
  void fill() override {
    MpiEngine m(w, op, count);
    m.fill();
    nccl::copy_to_device(dsend, m.send.data(), count * 4);
  }
  void run() override {
    size_t c = op == "reduce_scatter" || op == "allgather" ? per_rank() : count;
    nccl::run(ctx, op == "allreduce" ? nccl::Op::allreduce
                   : op == "broadcast" ? nccl::Op::broadcast
                   : op == "reduce_scatter" ? nccl::Op::reduce_scatter
                                            : nccl::Op::allgather,
              dsend, op == "broadcast" ? dsend : drecv, c, 0, nullptr);
    nccl::sync(ctx);
  }
  long long check() override {
    MpiEngine m(w, op, count);
    nccl::copy_to_host(op == "broadcast" ? m.send.data() : m.recv.data(), op == "broadcast" ? dsend : drecv, count * 4);
    return m.check();
  }
};
#endif

}  // namespace

void add_comm_bench_command(CLI::App& app, CommBenchArgs& a) {
  auto* c = app.add_subcommand(
      "comm-bench",
      "Collective bandwidth, nccl-tests style (run under mpirun): per size the time, algbw, busbw and #wrong\n"
      "(the result checked against its exactly-known value). Also measures one core's memory copy bandwidth,\n"
      "the bound for host collectives on one node.\n"
      "  mpirun -np 2 mlperf-dist comm-bench -b 8 -e 256M -f 2                # plain MPI_Allreduce\n"
      "  mpirun -np 2 mlperf-dist comm-bench -b 1M -e 256M --bucketed         # what the trainer runs\n"
      "  mpirun -np 2 mlperf-dist comm-bench -b 1M -e 64M --bucketed --overlap");
  c->add_option("-b,--minbytes", a.min_bytes, "Smallest size in bytes (K, M, G suffixes: powers of 1024)")
      ->capture_default_str();
  c->add_option("-e,--maxbytes", a.max_bytes, "Largest size in bytes (K, M, G suffixes)")->capture_default_str();
  c->add_option("-f,--stepfactor", a.factor, "Multiply the size by this factor between sizes (> 1)")
      ->check(CLI::Range(1.0001, 1e9))
      ->capture_default_str();
  c->add_option("-n,--iters", a.iters, "Timed iterations per size")->check(CLI::Range(1, 1000000))->capture_default_str();
  c->add_option("-w,--warmup_iters", a.warmup, "Untimed warm-up iterations per size")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  c->add_option("--op", a.op, "Collective: allreduce, broadcast, reduce_scatter or allgather")
      ->check(CLI::IsMember({"allreduce", "broadcast", "reduce_scatter", "allgather"}))
      ->capture_default_str();
  c->add_option("--backend", a.backend,
                "mpi: one plain MPI collective of the whole buffer (the baseline); hierarchical: the communicator's "
                "shared-memory node step + per-rank rails across nodes; nccl: device buffers through NCCL (needs a GPU)")
      ->check(CLI::IsMember({"mpi", "hierarchical", "nccl"}))
      ->capture_default_str();
  c->add_flag("--bucketed", a.bucketed,
              "Run exactly what the trainer runs: the buffer cut into 256 KiB views, its buckets (--bucket-mb), "
              "grad_ready in reverse order, and its automatic backend choice (overrides --backend; allreduce only)");
  c->add_option("--precision", a.precision, "Wire precision of the communicator paths: fp32, bf16 or fp16")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
  c->add_option("--bucket-mb", a.bucket_mb, "Bucket cap in MB for --bucketed (0: the measured default)")
      ->capture_default_str();
  c->add_option("--first-bucket-mb", a.first_bucket_mb, "Cap of the first bucket in MB (0: the default)")
      ->capture_default_str();
  c->add_option("--small-kb", a.small_kb, "auto backend: buckets below this many KiB go to mpi (0: default)")
      ->capture_default_str();
  c->add_option("--chunk-kb", a.chunk_kb, "hierarchical: pipeline chunk in KiB (0: default)")->capture_default_str();
  c->add_option("--comm-timeout", a.comm_timeout,
                "Seconds before a collective that has not completed ends the job, naming the missing ranks")
      ->capture_default_str();
  c->add_flag("--overlap", a.overlap,
              "Also measure overlap (OSU style): the collective started, a compute kernel run with progress calls "
              "between 32 slices (per view with --bucketed), then waited for; overlap % = 100 * (1 - (t_total - "
              "t_compute) / t_comm), clipped to 0..100 (allreduce only)");
  c->add_option("--compute-us", a.compute_us,
                "Overlap mode: compute kernel length in microseconds per iteration (0: the size's measured comm time)")
      ->capture_default_str();
  c->add_flag("--side-by-side", a.side_by_side,
              "allreduce: time plain MPI_Allreduce and the trainer's bucketed path in the same run, alternating "
              "iterations (fair on a noisy machine); prints both busbw columns and their ratio");
  c->add_option("--json", a.json, "Also write the results as JSON to this file (rank 0)");
  c->add_option("--test-hang-rank", a.test_hang_rank,
                "Test hook: this rank skips a collective (a bucketed step with --bucketed, else a blocking allreduce)")
      ->group("");
}

int run_comm_bench_command(CommBenchArgs& a, int argc, char** argv) {
  openblas_set_num_threads(1);
  World w = init_world(&argc, &argv);
  set_comm_timeout(a.comm_timeout);
  const size_t minb = parse_size(a.min_bytes), maxb = parse_size(a.max_bytes);
  if (minb == 0 || maxb < minb) throw UserError("need 0 < min bytes <= max bytes");
  std::string backend = a.bucketed || a.side_by_side ? "auto" : a.backend;  // the trainer's own choice
  if ((a.bucketed || backend == "hierarchical") && a.op != "allreduce")
    throw UserError("--bucketed and --backend hierarchical run allreduce only");

  CommConfig cfg;
  cfg.backend = backend == "mpi" ? "mpi" : backend;
  cfg.bucket_mb = a.bucket_mb;
  cfg.first_bucket_mb = a.first_bucket_mb;
  cfg.precision = a.precision;
  cfg.small_kb = a.small_kb;
  cfg.chunk_kb = a.chunk_kb;
  cfg.timeout_s = a.comm_timeout;

  if (a.test_hang_rank >= 0) {
    // Watchdog test: rank `test_hang_rank` skips one collective: with --bucketed a bucketed
    // gradient step, otherwise a blocking allreduce of comm/collectives.h.
    ParamStore s;
    add_param(s, "w", 1 << 20, ParamKind::weight);
    finalize_params(s);
    auto c = make_communicator(w, cfg, s);
    barrier(w);
    if (w.rank == a.test_hang_rank) {
      sleep(static_cast<unsigned>(3 * a.comm_timeout + 30));
    } else if (a.bucketed) {
      grads_begin_step(*c);
      grad_ready(*c, s, 0);
      grads_finish_step(*c, s);
    } else {
      allreduce_sum_floats(w, s.grads.data(), s.grads.size());
    }
    finalize_world(w);
    return 0;
  }

  double copy_gbps = 0;
  if (w.rank == 0) copy_gbps = measure_copy_gbps();
  broadcast_bytes(w, &copy_gbps, sizeof copy_gbps, 0);
  Compute cpu;
  cpu.calibrate();

#ifdef MLPD_HAVE_NCCL
  nccl::Ctx* nctx = nullptr;
  if (backend == "nccl") {
    if (nccl::device_count() == 0) throw UserError("--backend nccl: no GPU visible on this machine");
    nctx = nccl::create(w.comm, w.local_rank);
  }
#else
  if (backend == "nccl") throw UserError("--backend nccl: this build has no CUDA/NCCL");
#endif

  const double bus = bus_factor(a.op, w.size);
  if (w.rank == 0 && a.side_by_side) {
    std::printf("# mlperf-dist comm-bench: allreduce side by side, %d ranks on %d node(s), %d iters, %d warm-up, %s; "
                "time = median over iterations of the slowest rank\n",
                w.size, w.nodes, a.iters, a.warmup, a.precision.c_str());
    std::printf("# copy bandwidth (one core, memcpy of 64 MiB): %.2f GB/s; goal for the trainer's path on 2 ranks: "
                "busbw >= 0.2 x copy = %.2f GB/s\n",
                copy_gbps, 0.2 * copy_gbps);
  } else if (w.rank == 0) {
    std::printf("# mlperf-dist comm-bench: op %s, %s, %d ranks on %d node(s), %d iters, %d warm-up, %s; "
                "time = median over iterations of the slowest rank\n",
                a.op.c_str(), a.bucketed ? "bucketed (the trainer's path)" : ("backend " + backend).c_str(), w.size,
                w.nodes, a.iters, a.warmup, a.precision.c_str());
    std::printf("# copy bandwidth (one core, memcpy of 64 MiB): %.2f GB/s; goal for the trainer's path on 2 ranks: "
                "busbw >= 0.2 x copy = %.2f GB/s\n",
                copy_gbps, 0.2 * copy_gbps);
    if (a.bucketed || backend == "hierarchical") {
      ParamStore empty;
      auto probe = make_communicator(w, cfg, empty);
      std::printf("# %s\n", describe(*probe).c_str());
    }
    std::printf("#%11s %12s %6s %12s %10s %10s %8s%s\n", "size", "count", "type", "time(us)", "algbw(GB/s)",
                "busbw(GB/s)", "#wrong", a.overlap ? "   t_cpu(us) t_total(us) overlap(%)" : "");
  } else if (!a.side_by_side && (a.bucketed || backend == "hierarchical")) {
    ParamStore empty;
    auto probe = make_communicator(w, cfg, empty);
  }

  if (a.side_by_side) {
    if (a.op != "allreduce") throw UserError("--side-by-side runs allreduce only");
    if (w.rank == 0)
      std::printf("# side by side, alternating iterations: plain = MPI_Allreduce (out of place), trainer = bucketed path\n"
                  "#%11s %12s %11s %11s %11s %11s %7s %8s\n",
                  "size", "count", "plain(us)", "trainer(us)", "plain busbw", "trainer bus", "ratio", "#wrong");
    nlohmann::json results = nlohmann::json::array();
    long long total_wrong = 0;
    for (double b = static_cast<double>(minb); b <= static_cast<double>(maxb) * 1.0000001; b *= a.factor) {
      const size_t count = std::max<size_t>(1, static_cast<size_t>(b) / 4);
      MpiEngine plain(w, "allreduce", count);
      CommEngine trainer(w, cfg, count, true);
      Engine* engines[2] = {&plain, &trainer};
      std::vector<double> times[2];
      for (int i = 0; i < a.warmup + a.iters; ++i)
        for (int k = 0; k < 2; ++k) {
          engines[k]->fill();
          barrier(w);
          double t0 = MPI_Wtime();
          engines[k]->run();
          double dt = MPI_Wtime() - t0;
          if (i >= a.warmup) times[k].push_back(dt);
        }
      int64_t wrong = plain.check() + trainer.check();
      allreduce_sum_i64(w, &wrong, 1);
      total_wrong += wrong;
      const double tp = median_of_max(w, times[0]), tt = median_of_max(w, times[1]);
      const double bp = static_cast<double>(count * 4) / tp / 1e9 * bus, bt = static_cast<double>(count * 4) / tt / 1e9 * bus;
      if (w.rank == 0) {
        std::printf("%12s %12zu %11.2f %11.2f %11.3f %11.3f %7.2f %8lld\n", human(count * 4).c_str(), count, tp * 1e6,
                    tt * 1e6, bp, bt, tp / tt, static_cast<long long>(wrong));
        std::fflush(stdout);
      }
      results.push_back({{"size", count * 4}, {"count", count}, {"time_us", tt * 1e6}, {"algbw", bt / (bus > 0 ? bus : 1)},
                         {"busbw", bt}, {"wrong", wrong}, {"plain_time_us", tp * 1e6}, {"plain_busbw", bp}});
      if (static_cast<double>(count) * 4 * a.factor < b) break;
    }
    if (w.rank == 0) {
      std::printf("# out of bounds values : %lld %s\n", total_wrong, total_wrong ? "ERROR" : "OK");
      if (!a.json.empty()) {
        nlohmann::json j = {{"copy_gbps", copy_gbps}, {"op", "allreduce"}, {"backend", "side-by-side"},
                            {"ranks", w.size}, {"results", results}};
        std::ofstream f(a.json);
        f << j.dump(1) << "\n";
      }
    }
    finalize_world(w);
    return total_wrong ? 1 : 0;
  }

  std::vector<Row> rows;
  for (double b = static_cast<double>(minb); b <= static_cast<double>(maxb) * 1.0000001; b *= a.factor) {
    size_t count = std::max<size_t>(1, static_cast<size_t>(b) / 4);
    if (a.op == "reduce_scatter" || a.op == "allgather")
      count = std::max<size_t>(1, count / static_cast<size_t>(w.size)) * static_cast<size_t>(w.size);
    std::unique_ptr<Engine> e;
#ifdef MLPD_HAVE_NCCL
    if (backend == "nccl") e = std::make_unique<NcclEngine>(w, nctx, a.op, count);
#endif
    if (!e) {
      if (backend == "mpi" && !a.bucketed) e = std::make_unique<MpiEngine>(w, a.op, count);
      else e = std::make_unique<CommEngine>(w, cfg, count, a.bucketed);
    }
    Row r;
    r.bytes = count * 4;
    r.count = count;
    for (int i = 0; i < a.warmup; ++i) {
      e->fill();
      barrier(w);
      e->run();
    }
    // Each iteration is timed alone (the in-place paths need their input rewritten, untimed); the
    // time of an iteration is its slowest rank's, and the figure is the median over iterations
    // (robust to a rank being descheduled on a shared machine). The mean goes to the JSON too.
    std::vector<double> times(static_cast<size_t>(a.iters));
    for (int i = 0; i < a.iters; ++i) {
      e->fill();
      barrier(w);  // the fill's skew between ranks is not the collective's time
      double t0 = MPI_Wtime();
      e->run();
      times[static_cast<size_t>(i)] = MPI_Wtime() - t0;
    }
    long long bad = e->check();
    double mean = 0;
    const double t = median_of_max(w, times, &mean);
    r.time_mean_us = mean * 1e6;
    int64_t wrong = bad;
    allreduce_sum_i64(w, &wrong, 1);
    r.time_us = t * 1e6;
    r.algbw = static_cast<double>(r.bytes) / t / 1e9;
    r.busbw = r.algbw * bus;
    r.wrong = wrong;
    if (a.overlap && e->overlappable()) {
      const double us = a.compute_us > 0 ? a.compute_us : r.time_us;
      const double iters = us * cpu.per_us;
      const int n = std::max(5, a.iters);
      std::vector<double> tc(static_cast<size_t>(n)), tt(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) {
        barrier(w);
        double t0 = MPI_Wtime();
        cpu.run(iters);
        tc[static_cast<size_t>(i)] = MPI_Wtime() - t0;
        e->fill();
        barrier(w);
        t0 = MPI_Wtime();
        e->overlapped(cpu, iters);
        tt[static_cast<size_t>(i)] = MPI_Wtime() - t0;
      }
      long long bad2 = e->check();
      int64_t wrong2 = bad2;
      allreduce_sum_i64(w, &wrong2, 1);
      r.wrong += wrong2;
      r.t_cpu_us = median_of_max(w, tc) * 1e6;
      r.t_total_us = median_of_max(w, tt) * 1e6;
      r.overlap_pct = 100.0 * std::clamp(1.0 - (r.t_total_us - r.t_cpu_us) / r.time_us, 0.0, 1.0);
    }
    if (w.rank == 0) {
      std::printf(r.time_us < 10 ? "%12s %12zu %6s %12.2f %10.3f %10.3f %8lld" : "%12s %12zu %6s %12.1f %10.3f %10.3f %8lld", human(r.bytes).c_str(), r.count, "float", r.time_us,
                  r.algbw, r.busbw, r.wrong);
      if (r.overlap_pct >= 0) std::printf("   %10.1f %11.1f %10.1f", r.t_cpu_us, r.t_total_us, r.overlap_pct);
      std::printf("\n");
      std::fflush(stdout);
    }
    rows.push_back(r);
    if (static_cast<double>(count) * 4 * a.factor < b) break;  // guard against a factor that does not grow
  }
  long long total_wrong = 0;
  for (const Row& r : rows) total_wrong += r.wrong;
  if (w.rank == 0) {
    std::printf("# out of bounds values : %lld %s\n", total_wrong, total_wrong ? "ERROR" : "OK");
    if (!a.json.empty()) {
      nlohmann::json j;
      j["copy_gbps"] = copy_gbps;
      j["op"] = a.op;
      j["backend"] = a.bucketed ? "bucketed" : backend;
      j["precision"] = a.precision;
      j["ranks"] = w.size;
      j["results"] = nlohmann::json::array();
      for (const Row& r : rows) {
        nlohmann::json x = {{"size", r.bytes},  {"count", r.count}, {"time_us", r.time_us},
                            {"algbw", r.algbw}, {"busbw", r.busbw}, {"wrong", r.wrong},
                            {"time_mean_us", r.time_mean_us}};
        if (r.overlap_pct >= 0) {
          x["t_cpu_us"] = r.t_cpu_us;
          x["t_total_us"] = r.t_total_us;
          x["overlap_pct"] = r.overlap_pct;
        }
        j["results"].push_back(x);
      }
      std::ofstream f(a.json);
      f << j.dump(1) << "\n";
      if (!f) throw UserError("cannot write " + a.json);
    }
  }
#ifdef MLPD_HAVE_NCCL
  if (nctx) nccl::destroy(nctx);
#endif
  finalize_world(w);
  return total_wrong ? 1 : 0;
}

}  // namespace mlpd::cli
