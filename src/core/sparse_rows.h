// A parameter view whose gradient, in a step, is non-zero only in the rows that step's batch
// touched (an embedding table), and which rows those were on this rank. The workload fills it
// (it knows its batch); the gradient exchange reads it to send only those rows instead of the
// whole table (comm/sparse_exchange.h). Neither knows the other: this header is all they share.
//
// Contract, per step: every row of the view NOT listed has a gradient of exactly +0.0 (the trainer
// zeroes the gradients before the step, and the workload adds only into the rows it lists).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mlpd {

struct SparseRows {
  size_t view = 0;             // index into ParamStore::views
  size_t width = 0;            // floats per row; the view's count is a multiple of it
  std::vector<int32_t> rows;   // this rank's step: ascending, unique, each in [0, count / width)
};

}  // namespace mlpd
