// allreduce: rank r contributes (r+1) * v(i); every rank receives n(n+1)/2 * v(i) in recv.
// Bus factor 2(n-1)/n: a ring moves each byte through every link 2(n-1)/n times (nccl-tests).
#include "comm/bench/collective.h"
#include "comm/watchdog.h"

namespace mlpd::comm_bench {

namespace {

double bus_factor(int ranks) { return 2.0 * (ranks - 1) / ranks; }

void fill(const World& w, float* send, size_t count) { fill_rank_scaled(w, send, 0, count); }

void run(const World& w, float* send, float* recv, size_t count) {
  WatchScope watch("allreduce");
  MPI_CHECK(MPI_Allreduce(send, recv, static_cast<int>(count), MPI_FLOAT, MPI_SUM, w.comm));
}

MPI_Request start(const World& w, float* send, float* recv, size_t count) {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Iallreduce(send, recv, static_cast<int>(count), MPI_FLOAT, MPI_SUM, w.comm, &request));
  return request;
}

long long count_wrong(const World& w, const float* recv, size_t count) { return count_wrong_sums(w, recv, 0, count); }

}  // namespace

const Collective kAllreduce = {.name = "allreduce",
                               .bus_factor = bus_factor,
                               .fill = fill,
                               .run_mpi = run,
                               .start_mpi = start,
                               .count_wrong = count_wrong,
                               .nccl_op = nccl::Op::allreduce};

}  // namespace mlpd::comm_bench
