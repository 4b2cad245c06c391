// One collective of comm-bench, as plain data: how its inputs are filled so that the result is
// known exactly, how it runs once over MPI, how its output is checked, and its bus factor. Each
// collective is one small file (allreduce.cpp, broadcast.cpp, reduce_scatter.cpp, allgather.cpp);
// kCollectives lists them. The harness (harness.h) times and checks them; path.h runs them on
// plain MPI, the communicator or NCCL.
//
// Buffers follow nccl-tests: `count` floats in send and in recv on every rank (the op's larger
// buffer). reduce_scatter and allgather work on one block of count / ranks floats per rank, so
// their count is a multiple of the ranks.
//
// Inputs: rank r holds (r+1) * input_pattern(i) at element i: small integers, exact in fp32, bf16
// and fp16 and in every summation order, so every rank knows the exact expected result.
#pragma once
#include <cstddef>
#include <string>

#include "comm/cuda/nccl_comm.h"  // nccl::Op only: plain C++, no CUDA types
#include "comm/world.h"

namespace mlpd::comm_bench {

// Defined with designated initializers; a field left out keeps the default below.
struct Collective {
  const char* name = nullptr;
  bool per_rank_blocks = false;  // count is split into one block per rank (reduce_scatter, allgather)
  bool in_place = false;         // the result is written over send (broadcast), else into recv
  // busbw = algbw * bus_factor(ranks): comparable with the link's bandwidth whatever the ranks.
  double (*bus_factor)(int ranks) = nullptr;
  // Untimed: writes this rank's inputs into send (count floats).
  void (*fill)(const World& w, float* send, size_t count) = nullptr;
  // Timed: the collective once, blocking, under the hang watchdog.
  void (*run_mpi)(const World& w, float* send, float* recv, size_t count) = nullptr;
  // Overlap mode: the same collective, non-blocking (completed by MPI_Test / MPI_Wait);
  // nullptr where the collective is not measured for overlap.
  MPI_Request (*start_mpi)(const World& w, float* send, float* recv, size_t count) = nullptr;
  // Elements of this rank's result (send if in_place, else recv) that differ from the exact value.
  long long (*count_wrong)(const World& w, const float* result, size_t count) = nullptr;
  nccl::Op nccl_op = nccl::Op::allreduce;  // the same collective on NCCL (--backend nccl)
};

extern const Collective kAllreduce;
extern const Collective kBroadcast;
extern const Collective kReduceScatter;
extern const Collective kAllgather;
// The one list: --op names one of these.
inline const Collective* const kCollectives[] = {&kAllreduce, &kBroadcast, &kReduceScatter, &kAllgather};

const Collective* find_collective(const std::string& name);  // nullptr when unknown

// Floats per rank block of a per_rank_blocks collective.
inline size_t per_rank_block(const World& w, size_t count) { return count / static_cast<size_t>(w.size); }

inline float input_pattern(size_t i) { return static_cast<float>(i % 5 + 1); }
// The sum over ranks of (r+1): what a summed element is, divided by its input_pattern.
inline float rank_factor_sum(int ranks) { return static_cast<float>(ranks * (ranks + 1) / 2); }

// x[i] = (rank+1) * input_pattern(first + i), i < n: this rank's part of a summed or gathered input.
void fill_rank_scaled(const World& w, float* x, size_t first, size_t n);
// Elements i < n with x[i] != rank_factor_sum * input_pattern(first + i): a wrong sum over ranks.
long long count_wrong_sums(const World& w, const float* x, size_t first, size_t n);

}  // namespace mlpd::comm_bench
