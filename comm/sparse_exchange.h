// Sparse exchange of embedding-table gradients (host only). Instead of allreducing a whole table,
// every rank sends the rows its step touched (indices and gradient rows, one MPI_Allgatherv) and
// every rank sums each touched row over all ranks in the canonical order (reduce_kernels.h), with a
// row of +0.0 for each rank that did not touch it. Those are exactly the additions the dense path
// makes for that row (an untouched row of a rank's buffer is +0.0, core/sparse_rows.h), so the
// result is the dense one bit for bit: a -0.0 sum becomes +0.0 where some rank did not touch the
// row, as in the dense sum, and flush-to-zero or a compressed wire precision act alike. Rows no rank
// touched stay +0.0, which is what the dense sum of zeros gives.
//
// The path is chosen per step and collectively: every rank's row counts are allgathered first, and
// every rank applies the same rule to the same numbers (sparse_is_cheaper), so all take the same
// path. The communicator (communicator.cpp) keeps the tables out of its buckets and calls this at
// grads_finish_step, after the buckets are done; a dense step reduces the tables as buckets then.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "comm/backend.h"
#include "core/sparse_rows.h"

namespace mlpd {

enum class SparseMode : uint8_t { automatic, on, off };
SparseMode parse_sparse_mode(const std::string& s);  // "auto" | "on" | "off"; UserError otherwise
const char* sparse_mode_name(SparseMode m);

struct SparseTable {
  size_t view = 0;    // index into ParamStore::views
  size_t offset = 0;  // elements, into the flat gradient buffer
  size_t count = 0;   // elements: rows * width
  size_t width = 0;   // floats per row
};

// Per communicator: the tables, an MPI communicator of its own (its blocking collectives must not
// be matched against the backends' non-blocking ones), scratch that grows only when a step needs
// more than any step before, and what the log reports.
struct SparseExchange {
  SparseMode mode = SparseMode::automatic;
  std::vector<SparseTable> tables;
  size_t dense_bytes = 0;       // of all tables, per step
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<int> mine;        // [table] rows this rank touched
  std::vector<int> rows;        // [rank * tables + table] rows, from the allgather
  std::vector<int> counts, displs;  // per rank, in floats, for the allgatherv
  std::vector<float> send, recv;    // per table: the row indices (int32 bits), then the rows
  std::vector<float> zeros;         // one row of +0.0, as wide as the widest table
  std::vector<size_t> block, cur, end;  // per rank, positions in recv
  std::vector<const float*> src;
  std::vector<const void*> srcv;
  int64_t sparse_steps = 0, dense_steps = 0;
  double gathered_bytes = 0;    // summed over the sparse steps (indices and rows of every rank)
};

// The rule, pure: sparse when the bytes every rank gathers (indices and rows of all ranks) are
// fewer than the tables' dense bytes.
inline bool sparse_is_cheaper(size_t gathered_bytes, size_t dense_bytes) { return gathered_bytes < dense_bytes; }

// Which path this step takes (true: sparse), the same on every rank; collective over x.comm.
// touched[i] describes x.tables[i]; it also counts the step for the log.
bool sparse_step_chosen(SparseExchange& x, const Topology& t, const std::vector<SparseRows>& touched);
// The sparse path, after sparse_step_chosen returned true on every rank: in grads (the host flat
// gradient buffer), each row some rank touched becomes its canonical sum over all ranks.
void sparse_exchange(SparseExchange& x, const Topology& t, WirePrecision p, float* grads,
                     const std::vector<SparseRows>& touched);

}  // namespace mlpd
