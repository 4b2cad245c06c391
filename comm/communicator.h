// The gradient communicator: buckets of the flat gradient buffer, reduced across ranks while
// backward goes on, through one of several backends behind one small interface (comm/backend.h).
//
//   mpi           host buffers over MPI (MPI_Iallgather + the canonical sum; small buckets)
//   hierarchical  reduce inside each node in an MPI-3 shared-memory window (each rank sums its
//                 slice of every rank's buffer), allreduce across nodes rank-by-rank between the
//                 ranks of equal local rank, everyone copies the result back
//   nccl          device buffers (compiled when CUDA and NCCL are found; needs a GPU at run time)
//   auto          nothing on 1 rank; mpi below the measured small-bucket threshold, else
//                 hierarchical
//
// Every host path sums each element in one canonical order (comm/reduce_kernels.h), so the result
// does not depend on bucket boundaries or on the backend: bucketed == flat, bit for bit.
// Gradient averaging is not done here: the trainer scales the loss by 1/global_batch, so the sum
// is the mean (the one place gradients are averaged).
//
// Overlap without a comm thread: MPI is FUNNELED; every MPI call is made by the main thread, from
// grad_ready() / comm_progress() between layers of backward and from the waits. Reductions then
// advance with non-blocking collectives (MPI_Ibarrier, MPI_Iallgather) while compute goes on, and
// no thread spins on a core that backward needs. All buffers and windows are allocated once here.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "comm/world.h"
#include "core/param_store.h"

namespace mlpd {

struct CommConfig {
  std::string backend = "auto";     // auto | mpi | hierarchical | nccl
  double bucket_mb = 0;             // 0 = the measured CPU default (kDefaultBucketMb), 25 on GPU
  double first_bucket_mb = 0;       // 0 = a small default (kDefaultFirstBucketMb)
  std::string precision = "fp32";   // fp32 | bf16 | fp16 (compressed on the wire, accumulated in fp32)
  bool overlap = true;              // false: all buckets start only at grads_finish_step
  double timeout_s = 600;           // watchdog (applies process-wide, to every collective)
  bool record_spans = false;        // keep a (start, end, bytes) span per bucket for take_spans (trace)
  // Extensions (defaults are the measured ones; tests and comm-bench set them):
  double small_kb = 0;              // auto: buckets below this go to mpi (0 = kDefaultSmallKb, kDefaultPairSmallKb)
  double chunk_kb = 0;              // hierarchical: pipeline chunk per job (0 = kDefaultChunkKb)
  int ranks_per_node = 0;           // test hook: pretend nodes of this many consecutive ranks (0 = real nodes)
};

inline constexpr double kDefaultBucketMb = 4.0;        // CPU; see describe() and the note in comm/
inline constexpr double kDefaultGpuBucketMb = 25.0;
inline constexpr double kDefaultFirstBucketMb = 0.25;  // small: the first allreduce starts early in backward
inline constexpr double kDefaultSmallKb = 8.0;   // below: MPI (vader eager); at and above: shared memory
// Two ranks in fp32: an exchange in eager-sized pieces plus a local add is exact (x0 + x1 ==
// x1 + x0) and beats the shared-memory node step below this size (comm/README.md).
inline constexpr double kDefaultPairSmallKb = 32.0;
inline constexpr double kDefaultChunkKb = 1024.0;

struct CommSpan {
  std::string name;
  int bucket;
  double start_s, end_s;  // MPI_Wtime()
  size_t bytes;
};

class Communicator;  // owns windows, communicators, buffers; RAII

std::unique_ptr<Communicator> make_communicator(World& w, const CommConfig& cfg, const ParamStore& store);
// Out-of-line destruction, so unique_ptr<Communicator> works with the incomplete type (see below).
void destroy_communicator(Communicator* c);

void grads_begin_step(Communicator& c);
void grad_ready(Communicator& c, ParamStore& s, size_t view);
void grads_finish_step(Communicator& c, ParamStore& s);
void allreduce_sum(Communicator& c, float* data, size_t n);
// The spans recorded since the last call (empty unless CommConfig::record_spans).
std::vector<CommSpan> take_spans(Communicator& c);
std::string describe(const Communicator& c);

// Extensions.
// Advances in-flight reductions without blocking (call between layers of a long backward).
// Returns true when nothing is in flight.
bool comm_progress(Communicator& c);
// Non-blocking allreduce_sum: start, then comm_progress() as you like, then wait (overlap bench).
void allreduce_sum_start(Communicator& c, float* data, size_t n);
void allreduce_sum_wait(Communicator& c);
// The backend this communicator uses for a bucket of `bytes` ("none" on 1 rank).
std::string backend_for_bytes(const Communicator& c, size_t bytes);
// Bucket layout: element ranges [offset, offset+count) of the flat gradient buffer, in the order
// they are reduced (bucket 0 holds the last views).
struct BucketInfo {
  size_t offset, count, first_view, last_view;
  std::string backend;
};
std::vector<BucketInfo> buckets(const Communicator& c);

}  // namespace mlpd

namespace std {
template <>
struct default_delete<mlpd::Communicator> {
  void operator()(mlpd::Communicator* c) const { mlpd::destroy_communicator(c); }
};
}  // namespace std
