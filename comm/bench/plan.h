// comm-bench's options checked and resolved into what will run. Every check is a usage error
// (UserError, exit code 2), made from the options and this node's memory alone, so every rank
// throws alike, before any collective or allocation.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "comm/bench/collective.h"
#include "comm/bench/harness.h"
#include "comm/bench/path.h"
#include "comm/communicator.h"

namespace mlpd::comm_bench {

struct Plan {
  const Collective* op = nullptr;
  PathKind path = PathKind::mpi;  // side by side runs both mpi and bucketed
  Device device = Device::cpu;    // cuda: the nccl path, or bucketed over a store on the GPU
  std::string backend;            // as reported: mpi | hierarchical | nccl | auto (the trainer's choice)
  CommConfig cfg;                 // the communicator paths' settings
  std::vector<size_t> counts;     // floats per size, in sweep order
};

Plan plan_bench(const Options& o, const World& w);

// "8", "1.5K", "64K", "256M", "1G" (K, M, G: powers of 1024; an optional B) -> bytes.
size_t parse_size(const std::string& s);

}  // namespace mlpd::comm_bench
