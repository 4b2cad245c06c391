// The MPI world as the trainer sees it: who am I, how many are we, who shares my node.
#pragma once
#include <mpi.h>

#include <string>

namespace mlpd {

struct World {
  int rank = 0;
  int size = 1;
  int local_rank = 0;  // rank among the ranks sharing this node
  int local_size = 1;
  int node = 0;        // index of this node, 0..nodes-1, ordered by the lowest world rank on it
  int nodes = 1;
  std::string hostname;
  MPI_Comm comm = MPI_COMM_WORLD;
  MPI_Comm node_comm = MPI_COMM_NULL;  // ranks of this node (MPI_Comm_split_type SHARED)
};

// MPI_Init (once per process) and the topology above. Safe to call when MPI is already up.
World init_world(int* argc, char*** argv);
// Frees the communicators and finalises MPI if we initialised it.
void finalize_world(World& w);
// Aborts every rank with `code` after printing `reason` with this rank's number.
[[noreturn]] void abort_world(const World& w, const std::string& reason, int code);

}  // namespace mlpd

// Every MPI call is checked: failure names file:line, the call and MPI's own message.
#define MPI_CHECK(call)                                                              \
  do {                                                                               \
    int mpi_rc_ = (call);                                                            \
    if (mpi_rc_ != MPI_SUCCESS) ::mlpd::mpi_fail(__FILE__, __LINE__, #call, mpi_rc_); \
  } while (0)

namespace mlpd {
[[noreturn]] void mpi_fail(const char* file, int line, const char* call, int rc);
}
