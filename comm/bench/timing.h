// What comm-bench measures besides the collectives: one core's memory copy bandwidth (the bound
// for host collectives on one node), a compute kernel of known length (for the overlap mode), and
// the one way a set of per-iteration times becomes a figure.
#pragma once
#include <vector>

#include "comm/world.h"

namespace mlpd::comm_bench {

// Single-core copy bandwidth in GB/s (bytes copied per second): memcpy of 64 MiB, buffers touched
// first, median of 5. Local: no MPI.
double measure_copy_gbps();

// A compute kernel of a given length: dependent FMAs on registers, so it neither touches memory
// nor calls MPI; calibrated once per run.
struct ComputeKernel {
  double iters_per_us = 100;
  volatile double sink = 0;  // keeps the loop from being optimised away
  void run(double iters);
  void calibrate();
};

// Per-iteration times -> each iteration's slowest rank -> the median over iterations (robust to a
// rank being descheduled on a shared machine), and the mean if asked. Collective.
double median_of_slowest(const World& w, std::vector<double> seconds, double* mean = nullptr);

}  // namespace mlpd::comm_bench
