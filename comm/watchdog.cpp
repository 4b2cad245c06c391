#include "comm/watchdog.h"

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

namespace mlpd {

namespace {

// CLOCK_MONOTONIC_COARSE: a few ns to read, ms resolution: plenty for timeouts of seconds.
struct Clock {
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<Clock, duration>;
  static time_point now() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return time_point(duration(static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec));
  }
};

constexpr int kNameWords = 5;  // 40 characters
constexpr int kExitCode = 3;  // the exit-code convention: a run aborted (src/cli/commands.h)

// One rank's public state on the node board. Only atomics: other processes read it any time.
struct alignas(64) Slot {
  std::atomic<uint64_t> last_begun;   // sequence number of the last collective begun (0: none yet)
  std::atomic<uint64_t> oldest_seq;   // oldest collective still in flight (0: none)
  std::atomic<int64_t> oldest_bucket;
  std::atomic<int64_t> world_rank;
  std::atomic<uint64_t> name[kNameWords];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the board needs lock-free atomics");

struct InFlight {
  uint64_t seq;
  const char* name;
  int bucket;
  Clock::time_point begun;
};

// Process-wide state: allocated once and never destroyed, so the detached watchdog thread can
// never see it torn down at exit. The in-flight list belongs to the thread that makes the MPI
// calls (MPI_THREAD_FUNNELED): no lock on that path, which is on every small allreduce. The
// oldest entry is published in atomics, seqlock style (fields first, then its sequence number),
// for the watchdog thread.
struct State {
  State() { inflight.reserve(1024); }
  std::vector<InFlight> inflight;  // in begin order; MPI thread only
  uint64_t next_seq = 1;
  std::atomic<uint64_t> pub_seq{0};  // oldest in flight (0: none)
  std::atomic<const char*> pub_name{nullptr};
  std::atomic<int> pub_bucket{-1};
  std::atomic<int64_t> pub_begun_ns{0};
  std::atomic<double> timeout_s{600.0};
  std::atomic<bool> thread_started{false};
  std::mutex init_mu;  // watchdog_init / watchdog_shutdown against the report
  // Node board (null before watchdog_init).
  std::atomic<Slot*> board{nullptr};
  Slot* mine = nullptr;
  const char* packed_name = nullptr;  // the name last written to the board (names are static strings)
  int local_size = 1, local_rank = 0, world_rank = 0, world_size = 1, nodes = 1;
  MPI_Win win = MPI_WIN_NULL;
};

State& st() {
  static State* s = new State;
  return *s;
}

void pack_name(Slot* slot, const char* name) {
  char buf[kNameWords * 8] = {0};
  std::strncpy(buf, name, sizeof buf - 1);
  for (int i = 0; i < kNameWords; ++i) {
    uint64_t v;
    std::memcpy(&v, buf + 8 * i, 8);
    slot->name[i].store(v, std::memory_order_relaxed);
  }
}

std::string unpack_name(const Slot* slot) {
  char buf[kNameWords * 8 + 1] = {0};
  for (int i = 0; i < kNameWords; ++i) {
    uint64_t v = slot->name[i].load(std::memory_order_relaxed);
    std::memcpy(buf + 8 * i, &v, 8);
  }
  return std::string(buf);
}

// Publishes the oldest in-flight collective of this process (MPI thread only).
void publish_oldest(State& s) {
  if (s.inflight.empty()) {
    s.pub_seq.store(0, std::memory_order_release);
    if (s.mine) s.mine->oldest_seq.store(0, std::memory_order_release);
    return;
  }
  const InFlight& f = s.inflight.front();
  s.pub_seq.store(0, std::memory_order_release);
  s.pub_name.store(f.name, std::memory_order_relaxed);
  s.pub_bucket.store(f.bucket, std::memory_order_relaxed);
  s.pub_begun_ns.store(f.begun.time_since_epoch().count(), std::memory_order_relaxed);
  s.pub_seq.store(f.seq, std::memory_order_release);
  if (s.mine) {
    if (f.name != s.packed_name) {
      pack_name(s.mine, f.name);
      s.packed_name = f.name;
    }
    s.mine->oldest_bucket.store(f.bucket, std::memory_order_relaxed);
    s.mine->oldest_seq.store(f.seq, std::memory_order_release);
  }
}

[[noreturn]] void report_and_exit(State& s, const InFlight& f, double waited) {
  std::string who;
  Slot* board = s.board.load(std::memory_order_acquire);
  std::string mine_name = f.name;
  if (board) {
    for (int q = 0; q < s.local_size; ++q) {
      if (q == s.local_rank) continue;
      const Slot& o = board[q];
      uint64_t last = o.last_begun.load(std::memory_order_acquire);
      uint64_t oldest = o.oldest_seq.load(std::memory_order_acquire);
      std::string oname = unpack_name(&o);
      std::string state;
      if (last < f.seq) {
        state = oldest ? "in '" + oname + "' #" + std::to_string(oldest)
                       : "in no collective, last began #" + std::to_string(last);
      } else if (oldest == f.seq && oname != mine_name) {
        state = "in '" + oname + "' #" + std::to_string(oldest) + " instead";
      } else {
        continue;  // arrived
      }
      if (!who.empty()) who += ", ";
      who += std::to_string(o.world_rank.load()) + " (" + state + ")";
    }
    if (who.empty()) who = "none on this node (all ranks here are inside it: the data path is stuck)";
    if (s.nodes > 1) who += "; ranks on other nodes are not visible from this node";
  } else {
    who = "unknown (no node board: init_world was not called)";
  }
  char bucket[48];
  if (f.bucket >= 0) std::snprintf(bucket, sizeof bucket, "bucket %d", f.bucket);
  else std::snprintf(bucket, sizeof bucket, "not a gradient bucket");
  char line[1024];
  std::snprintf(line, sizeof line,
                "mlperf-dist: watchdog: rank %d of %d: collective '%s' #%llu (%s) did not complete within "
                "%.1f s (timeout %.1f s); ranks that have not arrived: %s; ending the job\n",
                s.world_rank, s.world_size, f.name, static_cast<unsigned long long>(f.seq), bucket, waited,
                s.timeout_s.load(), who.c_str());
  // write(2): no locks, no buffering, safe while other threads are blocked inside MPI.
  ssize_t unused = ::write(2, line, std::strlen(line));
  (void)unused;
  std::_Exit(kExitCode);
}

void watchdog_loop() {
  State& s = st();
  for (;;) {
    double t = s.timeout_s.load();
    auto period = std::chrono::duration<double>(std::min(0.25, std::max(0.01, t / 20.0)));
    std::this_thread::sleep_for(period);
    const uint64_t seq = s.pub_seq.load(std::memory_order_acquire);
    if (seq == 0) continue;
    InFlight oldest{seq, s.pub_name.load(std::memory_order_relaxed), s.pub_bucket.load(std::memory_order_relaxed),
                    Clock::time_point(Clock::duration(s.pub_begun_ns.load(std::memory_order_relaxed)))};
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.pub_seq.load(std::memory_order_relaxed) != seq || !oldest.name) continue;  // changed meanwhile: it moves
    double waited = std::chrono::duration<double>(Clock::now() - oldest.begun).count();
    if (waited > s.timeout_s.load()) {
      std::lock_guard<std::mutex> lk(s.init_mu);
      report_and_exit(s, oldest, waited);
    }
  }
}

void ensure_thread(State& s) {
  bool expected = false;
  if (s.thread_started.compare_exchange_strong(expected, true)) std::thread(watchdog_loop).detach();
}

}  // namespace

void set_comm_timeout(double seconds) { st().timeout_s.store(seconds > 0 ? seconds : 600.0); }
double comm_timeout() { return st().timeout_s.load(); }

void watchdog_init(const World& w) {
  State& s = st();
  if (s.board.load()) return;
  s.local_size = w.local_size;
  s.local_rank = w.local_rank;
  s.world_rank = w.rank;
  s.world_size = w.size;
  s.nodes = w.nodes;
  // +64: Open MPI's shared segments are only 8-byte aligned; Slot wants 64.
  MPI_Aint bytes = w.local_rank == 0 ? static_cast<MPI_Aint>(sizeof(Slot)) * w.local_size + 64 : 0;
  void* base = nullptr;
  MPI_CHECK(MPI_Win_allocate_shared(bytes, 1, MPI_INFO_NULL, w.node_comm, &base, &s.win));
  MPI_Aint qsize = 0;
  int disp = 0;
  void* b0 = nullptr;
  MPI_CHECK(MPI_Win_shared_query(s.win, 0, &qsize, &disp, &b0));
  auto* board = reinterpret_cast<Slot*>((reinterpret_cast<uintptr_t>(b0) + 63) & ~uintptr_t{63});
  if (w.local_rank == 0) {
    for (int q = 0; q < w.local_size; ++q) {
      Slot* sl = new (&board[q]) Slot;  // construct the atomics in shared memory
      sl->last_begun.store(0);
      sl->oldest_seq.store(0);
      sl->oldest_bucket.store(-1);
      sl->world_rank.store(-1);
      for (auto& n : sl->name) n.store(0);
    }
  }
  MPI_CHECK(MPI_Barrier(w.node_comm));
  {
    std::lock_guard<std::mutex> lk(s.init_mu);
    s.mine = &board[w.local_rank];
    s.mine->world_rank.store(w.rank);
    s.mine->last_begun.store(s.next_seq - 1);
    s.packed_name = nullptr;
    publish_oldest(s);
  }
  MPI_CHECK(MPI_Barrier(w.node_comm));
  s.board.store(board, std::memory_order_release);
  ensure_thread(s);
}

void watchdog_shutdown() {
  State& s = st();
  if (!s.board.load()) return;
  {
    std::lock_guard<std::mutex> lk(s.init_mu);
    s.board.store(nullptr);
    s.mine = nullptr;
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && s.win != MPI_WIN_NULL) MPI_Win_free(&s.win);
}

uint64_t watch_begin(const char* name, int bucket) {
  State& s = st();
  uint64_t seq = s.next_seq++;
  s.inflight.push_back({seq, name, bucket, Clock::now()});
  if (s.mine) s.mine->last_begun.store(seq, std::memory_order_release);
  if (s.inflight.size() == 1) publish_oldest(s);
  if (!s.thread_started.load(std::memory_order_relaxed)) ensure_thread(s);
  return seq;
}

void watch_end(uint64_t seq) {
  State& s = st();
  for (size_t i = 0; i < s.inflight.size(); ++i) {
    if (s.inflight[i].seq == seq) {
      s.inflight.erase(s.inflight.begin() + static_cast<std::ptrdiff_t>(i));
      if (i == 0) publish_oldest(s);
      return;
    }
  }
}

}  // namespace mlpd
