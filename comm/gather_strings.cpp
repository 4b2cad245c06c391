#include "comm/gather_strings.h"

#include <climits>

#include "core/check.h"

namespace mlpd {

std::vector<std::string> gather_strings(const World& w, const std::string& mine) {
  MLPD_CHECK(mine.size() < static_cast<size_t>(INT_MAX), "gather_strings: string too long");
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(w.rank == 0 ? static_cast<size_t>(w.size) : 0);
  MPI_CHECK(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, w.comm));
  std::vector<int> displs;
  std::string all;
  if (w.rank == 0) {
    displs.resize(static_cast<size_t>(w.size));
    long long total = 0;
    for (int r = 0; r < w.size; ++r) {
      displs[static_cast<size_t>(r)] = static_cast<int>(total);
      total += lens[static_cast<size_t>(r)];
    }
    MLPD_CHECK(total < INT_MAX, "gather_strings: total too long");
    all.resize(static_cast<size_t>(total));
  }
  MPI_CHECK(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0, w.comm));
  std::vector<std::string> out;
  if (w.rank == 0)
    for (int r = 0; r < w.size; ++r)
      out.push_back(all.substr(static_cast<size_t>(displs[static_cast<size_t>(r)]), static_cast<size_t>(lens[static_cast<size_t>(r)])));
  return out;
}

std::vector<std::string> allgather_strings(const World& w, const std::string& mine) {
  MLPD_CHECK(mine.size() < static_cast<size_t>(INT_MAX), "allgather_strings: string too long");
  const int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<size_t>(w.size)), displs(static_cast<size_t>(w.size));
  MPI_CHECK(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, w.comm));
  long long total = 0;
  for (int r = 0; r < w.size; ++r) {
    displs[static_cast<size_t>(r)] = static_cast<int>(total);
    total += lens[static_cast<size_t>(r)];
  }
  MLPD_CHECK(total < INT_MAX, "allgather_strings: total too long");
  std::string all(static_cast<size_t>(total), '\0');
  MPI_CHECK(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, w.comm));
  std::vector<std::string> out;
  for (int r = 0; r < w.size; ++r)
    out.push_back(all.substr(static_cast<size_t>(displs[static_cast<size_t>(r)]), static_cast<size_t>(lens[static_cast<size_t>(r)])));
  return out;
}

}  // namespace mlpd
