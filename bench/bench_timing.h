// Timing for the single-thread kernel benches: the median of the thread's CPU time over reps,
// after one warm-up call (the machine is shared, so wall time includes time descheduled).
#pragma once
#include <algorithm>
#include <ctime>
#include <vector>

namespace mlpd::bench {

inline double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

template <class F>
double median_cpu_seconds(int reps, F&& f) {
  f();  // warm-up: scratch grown, caches warm
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const double c0 = thread_cpu_seconds();
    f();
    t.push_back(thread_cpu_seconds() - c0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace mlpd::bench
