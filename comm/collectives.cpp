#include "comm/collectives.h"

#include <algorithm>
#include <climits>

#include "comm/watchdog.h"

namespace mlpd {

namespace {

constexpr size_t kMaxCount = static_cast<size_t>(INT_MAX) / 2;

template <typename T>
void allreduce_chunks(const World& w, T* data, size_t n, MPI_Datatype type, MPI_Op op, const char* what) {
  if (w.size == 1) return;
  WatchScope watch(what);
  for (size_t off = 0; off < n; off += kMaxCount) {
    int count = static_cast<int>(std::min(kMaxCount, n - off));
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data + off, count, type, op, w.comm));
  }
}

}  // namespace

void broadcast_bytes(const World& w, void* data, size_t n, int root) {
  if (w.size == 1) return;
  WatchScope watch("broadcast");
  auto* p = static_cast<char*>(data);
  for (size_t off = 0; off < n; off += kMaxCount) {
    int count = static_cast<int>(std::min(kMaxCount, n - off));
    MPI_CHECK(MPI_Bcast(p + off, count, MPI_BYTE, root, w.comm));
  }
}

void broadcast_floats(const World& w, float* data, size_t n, int root) {
  broadcast_bytes(w, data, n * sizeof(float), root);
}

void allreduce_sum_floats(const World& w, float* data, size_t n) {
  allreduce_chunks(w, data, n, MPI_FLOAT, MPI_SUM, "allreduce_sum_floats");
}
void allreduce_sum_doubles(const World& w, double* data, size_t n) {
  allreduce_chunks(w, data, n, MPI_DOUBLE, MPI_SUM, "allreduce_sum_doubles");
}
void allreduce_sum_i64(const World& w, int64_t* data, size_t n) {
  allreduce_chunks(w, data, n, MPI_INT64_T, MPI_SUM, "allreduce_sum_i64");
}

double allreduce_max(const World& w, double v) {
  allreduce_chunks(w, &v, 1, MPI_DOUBLE, MPI_MAX, "allreduce_max");
  return v;
}

void barrier(const World& w) {
  WatchScope watch("barrier");
  MPI_CHECK(MPI_Barrier(w.comm));
}

void broadcast_parameters(const World& w, ParamStore& s) {
  broadcast_floats(w, s.params.data(), s.params.size(), 0);
  broadcast_floats(w, s.state.data(), s.state.size(), 0);
}

}  // namespace mlpd
