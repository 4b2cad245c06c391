#include "comm/world.h"

#include <unistd.h>

#include <cstdio>
#include <vector>

#include "comm/watchdog.h"
#include "core/check.h"

namespace mlpd {

namespace {
bool g_we_initialised = false;
}

void mpi_fail(const char* file, int line, const char* call, int rc) {
  char msg[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fail_at(file, line, std::string(call) + " failed: " + msg);
}

World init_world(int* argc, char*** argv) {
  int initialised = 0;
  MPI_CHECK(MPI_Initialized(&initialised));
  if (!initialised) {
    int provided = 0;
    // Funneled: only the main thread calls MPI; prefetch threads never do, and neither does the
    // communicator (its overlap is progressed from the main thread) nor the hang watchdog (it
    // reads a shared-memory board and never calls MPI).
    MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
    g_we_initialised = true;
  }
  World w;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &w.rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &w.size));
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &w.node_comm));
  MPI_CHECK(MPI_Comm_rank(w.node_comm, &w.local_rank));
  MPI_CHECK(MPI_Comm_size(w.node_comm, &w.local_size));
  char host[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  MPI_CHECK(MPI_Get_processor_name(host, &len));
  w.hostname.assign(host, static_cast<size_t>(len));

  // Node index: number the node leaders (local rank 0) in world-rank order.
  int is_leader = w.local_rank == 0 ? 1 : 0;
  std::vector<int> leaders(static_cast<size_t>(w.size));
  MPI_CHECK(MPI_Allgather(&is_leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, MPI_COMM_WORLD));
  int leader_world_rank = w.rank;
  MPI_CHECK(MPI_Bcast(&leader_world_rank, 1, MPI_INT, 0, w.node_comm));
  w.nodes = 0;
  for (int r = 0; r < w.size; ++r) {
    if (r == leader_world_rank) w.node = w.nodes;
    w.nodes += leaders[static_cast<size_t>(r)];
  }
  // The hang watchdog's side channel (a shared-memory board per node) and its thread.
  watchdog_init(w);
  return w;
}

void finalize_world(World& w) {
  watchdog_shutdown();
  if (w.node_comm != MPI_COMM_NULL) MPI_Comm_free(&w.node_comm);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (g_we_initialised && !finalized) MPI_Finalize();
}

void abort_world(const World& w, const std::string& reason, int code) {
  std::fprintf(stderr, "mlperf-dist: rank %d of %d aborting the job: %s\n", w.rank, w.size, reason.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace mlpd
