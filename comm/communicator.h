// The gradient communicator: buckets of the flat gradient buffer, reduced across ranks while
// backward goes on, through one of several backends behind one small interface (comm/backend.h).
//
//   mpi           host buffers over MPI (MPI_Iallgather + the canonical sum; small buckets)
//   hierarchical  reduce inside each node in an MPI-3 shared-memory window (each rank sums its
//                 slice of every rank's buffer), across nodes a chain in node order between the
//                 ranks of equal local rank (each node adds its ranks to the partial of the node
//                 before: plain rank order), the result passed back round; everyone copies it back
//   nccl          NCCL on the GPU (compiled when CUDA and NCCL are found; needs a GPU per rank at
//                 run time): the only backend for a store on the GPU; host buffers are staged
//   auto          nothing on 1 rank; store on the GPU: nccl; else mpi below the measured
//                 small-bucket threshold, else hierarchical
//
// Every host path sums each element in one canonical order (comm/reduce_kernels.h), so the result
// does not depend on bucket boundaries or on the backend: bucketed == flat, bit for bit.
// Sparse views (embedding tables, core/sparse_rows.h): on the host, at more than one rank, their
// gradients leave the buckets and are exchanged at grads_finish_step as the rows each rank's step
// touched, when that is cheaper than the dense bytes (chosen per step, the same on every rank:
// comm/sparse_exchange.h), bit for bit the dense sum either way. A store on the GPU keeps them in
// the dense NCCL buckets (the sparse exchange is host only).
// Gradient averaging is not done here: the trainer scales the loss by 1/global_batch, so the sum
// is the mean (the one place gradients are averaged).
//
// Overlap without a comm thread: MPI is FUNNELED; every MPI call is made by the main thread, from
// grad_ready() / comm_progress() between layers of backward and from the waits. Reductions then
// advance with non-blocking collectives (MPI_Ibarrier, MPI_Iallgather) while compute goes on, and
// no thread spins on a core that backward needs. All buffers and windows are allocated once here.
//
// Gradients on the GPU (store.device == Device::cuda, kernels/device.h: place_store_on): the
// buckets are the same ranges of the device gradient buffer, reduced in place by NCCL on its own
// stream. grad_ready starts a bucket as on the CPU, queued after the compute stream's work so far
// (an event); grads_finish_step makes the compute stream wait for the last bucket instead of
// waiting on the host, so the optimizer queued next sees the sums. The host waits for them only at
// the next grads_begin_step (or a host allreduce_sum), normally long done by then. The watchdog
// covers the host's time in here, as on the CPU (comm/README.md: "Gradients on the GPU").
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "comm/world.h"
#include "core/param_store.h"
#include "core/sparse_rows.h"

namespace mlpd {

struct CommConfig {
  std::string backend = "auto";     // auto | mpi | hierarchical | nccl (a store on the GPU: auto | nccl)
  double bucket_mb = 0;             // 0 = the measured CPU default (kDefaultBucketMb); with nccl or a
                                    // store on the GPU kDefaultGpuBucketMb
  double first_bucket_mb = 0;       // 0 = a small default (kDefaultFirstBucketMb)
  std::string precision = "fp32";   // fp32 | bf16 | fp16 (compressed on the wire, accumulated in fp32);
                                    // a store on the GPU: fp32 only
  bool overlap = true;              // false: all buckets start only at grads_finish_step
  double timeout_s = 600;           // watchdog (applies process-wide, to every collective)
  bool record_spans = false;        // keep a (start, end, bytes) span per bucket for take_spans (trace)
  // Extensions (defaults are the measured ones; tests and comm-bench set them):
  double small_kb = 0;              // auto: buckets below this go to mpi (0 = kDefaultSmallKb, kDefaultPairSmallKb)
  double chunk_kb = 0;              // hierarchical: pipeline chunk per job (0 = kDefaultChunkKb)
  int ranks_per_node = 0;           // test hook: pretend nodes of this many consecutive ranks (0 = real nodes)
  std::string sparse_embeddings = "auto";  // auto | on | off: sparse views' rows exchanged when cheaper /
                                           // always / never (dense buckets as before); host only
};

inline constexpr double kDefaultBucketMb = 4.0;        // CPU; see describe() and the note in comm/
inline constexpr double kDefaultGpuBucketMb = 25.0;      // nccl, and every store on the GPU
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

// Collective over w. Follows store.device: a store on the GPU gets device buckets and nccl (at more
// than one rank; the process's GPU is opened as kernels/device.h's open_device would: local_rank %
// GPUs); a backend other than auto/nccl, or a precision other than fp32, is then a UserError.
// `sparse` names the store's sparse views (their rows are ignored here); empty: all views dense.
// sparse_embeddings "on" with a store on the GPU is a UserError.
std::unique_ptr<Communicator> make_communicator(World& w, const CommConfig& cfg, const ParamStore& store,
                                                const std::vector<SparseRows>& sparse = {});
// Out-of-line destruction, so unique_ptr<Communicator> works with the incomplete type (see below).
void destroy_communicator(Communicator* c);

// The step: grads_begin_step, grad_ready once per view (backward's order), grads_finish_step. `s`
// is the store the communicator was made for (same views, same device). On the CPU the sums are in
// s.grads when grads_finish_step returns; on the GPU they are ordered before the compute stream's
// next work (the host has not waited).
void grads_begin_step(Communicator& c);
void grad_ready(Communicator& c, ParamStore& s, size_t view);
// `touched`: this step's rows of the sparse views given to make_communicator, in the same order
// (ignored when the communicator has no sparse exchange: 1 rank, GPU store, mode off).
void grads_finish_step(Communicator& c, ParamStore& s, const std::vector<SparseRows>& touched = {});
// Host memory (on every backend; nccl stages it through the GPU): data[0,n) summed in place
// across ranks, complete on return.
void allreduce_sum(Communicator& c, float* data, size_t n);
// Device memory, for a communicator of a store on the GPU (or with backend nccl): data[0,n) summed
// in place across ranks by NCCL, after the compute stream's work so far; on return the compute
// stream waits for the sum (work queued next, and a copy to the host, see it), the host has not
// waited. 1 rank: nothing. A host pointer here, or a device pointer to allreduce_sum, is a misuse
// that is not detected (no guessing from the pointer).
void allreduce_sum_device(Communicator& c, float* data, size_t n);
// The spans recorded since the last call (empty unless CommConfig::record_spans).
std::vector<CommSpan> take_spans(Communicator& c);
std::string describe(const Communicator& c);

// What the sparse exchange did so far, for the trainer's log.
struct SparseStats {
  std::string mode;             // auto | on | off
  bool active = false;          // false: no sparse views, 1 rank, store on the GPU, or mode off
  std::string inactive_why;     // when not active with sparse views: why
  size_t views = 0;
  size_t dense_bytes = 0;       // of the sparse views, per step
  int64_t sparse_steps = 0, dense_steps = 0;
  double gathered_bytes = 0;    // over the sparse steps: indices and rows of every rank
};
SparseStats sparse_stats(const Communicator& c);

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
