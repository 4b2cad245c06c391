// allgather: rank r sends its block, (r+1) * v(r*m + i) for i < m = count / n; every rank
// receives all blocks in rank order, so element i of recv is (i/m + 1) * v(i).
// Bus factor (n-1)/n: each rank receives every block but its own once.
#include "comm/bench/collective.h"
#include "comm/watchdog.h"

namespace mlpd::comm_bench {

namespace {

double bus_factor(int ranks) { return static_cast<double>(ranks - 1) / ranks; }

void fill(const World& w, float* send, size_t count) {
  const size_t block = per_rank_block(w, count);
  fill_rank_scaled(w, send, static_cast<size_t>(w.rank) * block, block);
}

void run(const World& w, float* send, float* recv, size_t count) {
  WatchScope watch("allgather");
  const int block = static_cast<int>(per_rank_block(w, count));
  MPI_CHECK(MPI_Allgather(send, block, MPI_FLOAT, recv, block, MPI_FLOAT, w.comm));
}

long long count_wrong(const World& w, const float* recv, size_t count) {
  const size_t block = per_rank_block(w, count);
  long long wrong = 0;
  for (size_t i = 0; i < block * static_cast<size_t>(w.size); ++i)
    wrong += recv[i] != static_cast<float>(i / block + 1) * input_pattern(i);
  return wrong;
}

}  // namespace

const Collective kAllgather = {.name = "allgather",
                               .per_rank_blocks = true,
                               .bus_factor = bus_factor,
                               .fill = fill,
                               .run_mpi = run,
                               .count_wrong = count_wrong,
                               .nccl_op = nccl::Op::allgather};

}  // namespace mlpd::comm_bench
