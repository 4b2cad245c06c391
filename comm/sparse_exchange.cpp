#include "comm/sparse_exchange.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "core/check.h"

namespace mlpd {

SparseMode parse_sparse_mode(const std::string& s) {
  if (s == "auto") return SparseMode::automatic;
  if (s == "on") return SparseMode::on;
  if (s == "off") return SparseMode::off;
  throw UserError("unknown sparse embedding mode '" + s + "' (expected auto, on or off)", 2);
}

const char* sparse_mode_name(SparseMode m) {
  switch (m) {
    case SparseMode::automatic: return "auto";
    case SparseMode::on: return "on";
    case SparseMode::off: return "off";
  }
  return "?";
}

namespace {

// Row indices travel as int32 bits in float slots (one buffer, one MPI datatype); read them back
// bytewise, never as floats.
inline int32_t index_at(const float* p, size_t i) {
  int32_t r;
  std::memcpy(&r, p + i, 4);
  return r;
}

void check_touched(const SparseExchange& x, const std::vector<SparseRows>& touched) {
  MLPD_CHECK(touched.size() == x.tables.size(), "sparse gradients: the touched rows do not match the sparse views");
  for (size_t v = 0; v < touched.size(); ++v)
    MLPD_CHECK(touched[v].view == x.tables[v].view && touched[v].width == x.tables[v].width &&
                   touched[v].rows.size() <= static_cast<size_t>(INT_MAX),
               "sparse gradients: the touched rows do not match the sparse views");
}

}  // namespace

bool sparse_step_chosen(SparseExchange& x, const Topology& t, const std::vector<SparseRows>& touched) {
  check_touched(x, touched);
  const size_t V = x.tables.size(), P = static_cast<size_t>(t.size);
  x.mine.resize(V);
  x.rows.resize(P * V);
  x.counts.resize(P);
  x.displs.resize(P);
  for (size_t v = 0; v < V; ++v) x.mine[v] = static_cast<int>(touched[v].rows.size());
  MPI_CHECK(MPI_Allgather(x.mine.data(), static_cast<int>(V), MPI_INT, x.rows.data(), static_cast<int>(V), MPI_INT,
                          x.comm));
  size_t gathered = 0;  // floats
  for (size_t r = 0; r < P; ++r) {
    size_t n = 0;
    for (size_t v = 0; v < V; ++v) n += static_cast<size_t>(x.rows[r * V + v]) * (1 + x.tables[v].width);
    x.counts[r] = static_cast<int>(std::min<size_t>(n, INT_MAX));
    x.displs[r] = static_cast<int>(std::min<size_t>(gathered, INT_MAX));
    gathered += n;
  }
  // One MPI_Allgatherv counts in int: a larger exchange goes dense (never at our scales).
  const bool fits = gathered <= static_cast<size_t>(INT_MAX);
  const bool sparse = fits && (x.mode == SparseMode::on || sparse_is_cheaper(gathered * 4, x.dense_bytes));
  if (sparse) {
    ++x.sparse_steps;
    x.gathered_bytes += static_cast<double>(gathered) * 4;
  } else {
    ++x.dense_steps;
  }
  return sparse;
}

void sparse_exchange(SparseExchange& x, const Topology& t, WirePrecision p, float* grads,
                     const std::vector<SparseRows>& touched) {
  const size_t V = x.tables.size(), P = static_cast<size_t>(t.size);
  // Pack this rank's part: per table its row indices, then those rows of its gradient.
  const size_t me = static_cast<size_t>(t.rank);
  const size_t total = static_cast<size_t>(x.displs[P - 1]) + static_cast<size_t>(x.counts[P - 1]);
  if (x.send.size() < static_cast<size_t>(x.counts[me])) x.send.resize(static_cast<size_t>(x.counts[me]));
  if (x.recv.size() < total) x.recv.resize(total);
  float* o = x.send.data();
  for (size_t v = 0; v < V; ++v) {
    const SparseTable& tb = x.tables[v];
    const std::vector<int32_t>& rows = touched[v].rows;
    const size_t nrows = tb.count / tb.width;
    for (size_t i = 0; i < rows.size(); ++i)
      MLPD_CHECK(rows[i] >= 0 && static_cast<size_t>(rows[i]) < nrows && (i == 0 || rows[i] > rows[i - 1]),
                 "sparse gradients: touched rows must be ascending, unique and inside the view");
    if (!rows.empty()) std::memcpy(o, rows.data(), rows.size() * 4);
    o += rows.size();
    for (const int32_t r : rows) {
      std::memcpy(o, grads + tb.offset + static_cast<size_t>(r) * tb.width, tb.width * 4);
      o += tb.width;
    }
  }
  MPI_CHECK(MPI_Allgatherv(x.send.data(), x.counts[me], MPI_FLOAT, x.recv.data(), x.counts.data(), x.displs.data(),
                           MPI_FLOAT, x.comm));

  // Sum, table by table: merge the ranks' ascending row lists; each row's contributions in the
  // canonical order (rank order, reduce_kernels.h), +0.0 where a rank did not touch the row.
  size_t widest = 0;
  for (const SparseTable& tb : x.tables) widest = std::max(widest, tb.width);
  if (x.zeros.size() < widest) x.zeros.assign(widest, 0.0f);
  x.block.resize(P);
  x.cur.resize(P);
  x.end.resize(P);
  x.src.resize(P);
  x.srcv.resize(P);
  const float* recv = x.recv.data();
  // Rank k's part of recv, per table: n indices at [block, end), then its n rows.
  for (size_t k = 0; k < P; ++k) x.block[k] = static_cast<size_t>(x.displs[k]);
  for (size_t v = 0; v < V; ++v) {
    const SparseTable& tb = x.tables[v];
    const size_t w = tb.width;
    for (size_t k = 0; k < P; ++k) {
      x.cur[k] = x.block[k];
      x.end[k] = x.block[k] + static_cast<size_t>(x.rows[k * V + v]);
    }
    for (;;) {
      int32_t row = INT32_MAX;
      bool any = false;
      for (size_t k = 0; k < P; ++k)
        if (x.cur[k] < x.end[k]) {
          const int32_t r = index_at(recv, x.cur[k]);
          if (!any || r < row) row = r;
          any = true;
        }
      if (!any) break;
      for (size_t k = 0; k < P; ++k) {
        if (x.cur[k] < x.end[k] && index_at(recv, x.cur[k]) == row) {
          x.src[k] = recv + x.end[k] + (x.cur[k] - x.block[k]) * w;
          ++x.cur[k];
        } else {
          x.src[k] = x.zeros.data();
        }
        x.srcv[k] = x.src[k];
      }
      canonical_sum(x.srcv.data(), x.src.data(), static_cast<int>(P), w, p,
                    grads + tb.offset + static_cast<size_t>(row) * w, nullptr);
    }
    for (size_t k = 0; k < P; ++k) x.block[k] = x.end[k] + (x.end[k] - x.block[k]) * w;  // the next table
  }
}

}  // namespace mlpd
