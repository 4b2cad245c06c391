// broadcast from rank 0, in place: rank 0 holds v(i), the others -1 (so a rank that received
// nothing is wrong everywhere); afterwards every rank holds v(i) in send.
// Bus factor 1: every rank receives the whole buffer once.
#include "comm/bench/collective.h"
#include "comm/watchdog.h"

namespace mlpd::comm_bench {

namespace {

double bus_factor(int) { return 1.0; }

void fill(const World& w, float* send, size_t count) {
  for (size_t i = 0; i < count; ++i) send[i] = w.rank == 0 ? input_pattern(i) : -1.0f;
}

void run(const World& w, float* send, float*, size_t count) {
  WatchScope watch("broadcast");
  MPI_CHECK(MPI_Bcast(send, static_cast<int>(count), MPI_FLOAT, 0, w.comm));
}

long long count_wrong(const World&, const float* send, size_t count) {
  long long wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += send[i] != input_pattern(i);
  return wrong;
}

}  // namespace

const Collective kBroadcast = {.name = "broadcast",
                               .in_place = true,
                               .bus_factor = bus_factor,
                               .fill = fill,
                               .run_mpi = run,
                               .count_wrong = count_wrong,
                               .nccl_op = nccl::Op::broadcast};

}  // namespace mlpd::comm_bench
