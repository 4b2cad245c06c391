// Hang watchdog for every collective: a collective that does not complete within the timeout
// ends the job with one line naming the collective, the bucket and the ranks that had not arrived.
//
// Side channel: a small MPI-3 shared-memory board on each node (allocated once in init_world),
// where every rank publishes, with plain atomic stores, the sequence number and name of the
// collective it is in. A watchdog thread per process reads the board without any MPI call, so it
// still works when the data path is stuck; on timeout it prints and _exit()s non-zero, and mpirun
// then ends the other ranks. Across nodes the board is not visible: the line names the laggards
// on this node and says so.
#pragma once
#include <cstdint>

#include "comm/world.h"

namespace mlpd {

// Called by init_world / finalize_world (collective over w.node_comm).
void watchdog_init(const World& w);
void watchdog_shutdown();

// Seconds after which a collective is declared hung (default 600). Same value on every rank.
void set_comm_timeout(double seconds);
double comm_timeout();

// Marks entry into / exit from one collective. Every rank must begin the same collectives in the
// same order (MPI requires it anyway): the sequence numbers then line up across ranks. Called by
// the thread that makes the MPI calls (MPI_THREAD_FUNNELED), so there is no lock on this path.
uint64_t watch_begin(const char* name, int bucket = -1);
void watch_end(uint64_t seq);

// RAII form for blocking calls.
struct WatchScope {
  uint64_t seq;
  explicit WatchScope(const char* name, int bucket = -1) : seq(watch_begin(name, bucket)) {}
  ~WatchScope() { watch_end(seq); }
  WatchScope(const WatchScope&) = delete;
  WatchScope& operator=(const WatchScope&) = delete;
};

}  // namespace mlpd
