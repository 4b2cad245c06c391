#include "comm/bench/timing.h"

#include <algorithm>
#include <cstring>

#include "comm/watchdog.h"

namespace mlpd::comm_bench {

double measure_copy_gbps() {
  const size_t n = 64u << 20;
  std::vector<char> a(n, 1), b(n, 2);
  std::vector<double> t;
  for (int k = 0; k < 6; ++k) {
    double t0 = MPI_Wtime();
    std::memcpy(b.data(), a.data(), n);
    double t1 = MPI_Wtime();
    a[static_cast<size_t>(k)] = b[static_cast<size_t>(k) + 1];  // keep the copies observable
    if (k > 0) t.push_back(t1 - t0);                            // the first copy pays the page faults
  }
  std::sort(t.begin(), t.end());
  return static_cast<double>(n) / t[t.size() / 2] / 1e9;
}

void ComputeKernel::run(double iters) {
  double x = 1.0, y = 1.0000001;
  for (long i = 0; i < static_cast<long>(iters); ++i) x = x * y + 1e-12;
  sink = x;
}

void ComputeKernel::calibrate() {
  double t0 = MPI_Wtime();
  run(2e6);
  double dt = MPI_Wtime() - t0;
  iters_per_us = 2e6 / (dt * 1e6);
}

double median_of_slowest(const World& w, std::vector<double> seconds, double* mean) {
  if (w.size > 1) {
    WatchScope watch("allreduce_max");
    MPI_CHECK(
        MPI_Allreduce(MPI_IN_PLACE, seconds.data(), static_cast<int>(seconds.size()), MPI_DOUBLE, MPI_MAX, w.comm));
  }
  if (mean) {
    *mean = 0;
    for (double x : seconds) *mean += x / static_cast<double>(seconds.size());
  }
  std::sort(seconds.begin(), seconds.end());
  const size_t mid = seconds.size() / 2;
  return seconds.size() % 2 ? seconds[mid] : 0.5 * (seconds[mid - 1] + seconds[mid]);
}

}  // namespace mlpd::comm_bench
