// comm-bench's output on rank 0: the table in nccl-tests' layout (header lines start with '#',
// one row per size as it completes) and, on request, the same figures as JSON.
#pragma once
#include <string>

#include "comm/bench/harness.h"
#include "comm/bench/plan.h"

namespace mlpd::comm_bench {

// comm_description: the communicator's describe() line for the communicator paths, else empty;
// gpu: rank 0's GPU for the GPU paths ("cuda:0 NVIDIA H200 (...)"), else empty.
void print_header(const World& w, const Options& o, const Plan& p, double copy_gbps,
                  const std::string& comm_description, const std::string& gpu);
void print_row(const SizeResult& r);               // flushed, so a long sweep shows progress
void print_side_by_side_row(const SizeResult& r);  // likewise
void print_summary(long long total_wrong);
// Throws UserError when the file cannot be written.
void write_json(const World& w, const Options& o, const Plan& p, const Report& report);

}  // namespace mlpd::comm_bench
