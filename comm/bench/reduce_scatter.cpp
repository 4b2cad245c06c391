// reduce_scatter: rank r contributes (r+1) * v(i) over the whole buffer; rank q receives block q
// of the sum, n(n+1)/2 * v(q*m + i) for i < m = count / n, in recv.
// Bus factor (n-1)/n: each rank sends all blocks but its own once.
#include "comm/bench/collective.h"
#include "comm/watchdog.h"

namespace mlpd::comm_bench {

namespace {

double bus_factor(int ranks) { return static_cast<double>(ranks - 1) / ranks; }

void fill(const World& w, float* send, size_t count) { fill_rank_scaled(w, send, 0, count); }

void run(const World& w, float* send, float* recv, size_t count) {
  WatchScope watch("reduce_scatter");
  const int block = static_cast<int>(per_rank_block(w, count));
  MPI_CHECK(MPI_Reduce_scatter_block(send, recv, block, MPI_FLOAT, MPI_SUM, w.comm));
}

long long count_wrong(const World& w, const float* recv, size_t count) {
  const size_t block = per_rank_block(w, count);
  return count_wrong_sums(w, recv, static_cast<size_t>(w.rank) * block, block);
}

}  // namespace

const Collective kReduceScatter = {.name = "reduce_scatter",
                                   .per_rank_blocks = true,
                                   .bus_factor = bus_factor,
                                   .fill = fill,
                                   .run_mpi = run,
                                   .count_wrong = count_wrong,
                                   .nccl_op = nccl::Op::reduce_scatter};

}  // namespace mlpd::comm_bench
