// Fuzzes our result-log checker (mlperf/check.h): the input is a result file, checked against the
// registered benchmarks as `mlperf-dist check` does. The checker answers every log with a report,
// so any exception, a crash, a leak or UB is a bug, and so is a report that contradicts itself.
#include <cstdio>
#include <cstdlib>

#include "mlperf/check.h"
#include "scratch.h"
#include "workloads/registry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mlpd::fuzz::write_scratch("result.txt", data, size);
  const mlpd::CheckReport r = mlpd::check_result_file(path, &mlpd::find_benchmark_spec);
  const bool consistent = r.ok == r.errors.empty() && (!r.converged || r.ok) && !r.summary.empty();
  if (!consistent) {
    std::fprintf(stderr, "check_fuzz: inconsistent report: ok %d, %zu errors, converged %d, summary '%s'\n", r.ok,
                 r.errors.size(), r.converged, r.summary.c_str());
    std::abort();
  }
  return 0;
}
