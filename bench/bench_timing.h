// What the single-thread kernel benches share: timing (the median of the thread's CPU time over
// reps, after one warm-up call; the machine is shared, so wall time includes time descheduled)
// and their command line.
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

// The kernel benches' command line, `name [reps] [--tsv]`; anything else prints the usage and
// exits with status 2.
struct KernelBenchArgs {
  int reps;
  bool tsv = false;
};

inline KernelBenchArgs parse_kernel_bench_args(int argc, char** argv, int default_reps, const char* name) {
  KernelBenchArgs a{default_reps};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--tsv") == 0) {
      a.tsv = true;
    } else if (std::atoi(argv[i]) > 0) {
      a.reps = std::atoi(argv[i]);
    } else {
      std::fprintf(stderr, "usage: %s [reps] [--tsv]\n", name);
      std::exit(2);
    }
  }
  return a;
}

}  // namespace mlpd::bench
