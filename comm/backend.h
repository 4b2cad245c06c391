// The one small interface every communication backend implements: in-place sums of host float
// ranges across all ranks, started and then advanced without blocking. Jobs complete in the order
// they were submitted; every rank submits the same jobs in the same order. A backend that reduces
// device memory (nccl) also takes device jobs (submit_device), in the same job order.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/reduce_kernels.h"
#include "comm/world.h"

namespace mlpd {

// Who sums with whom, and in which order (see reduce_kernels.h).
struct Topology {
  MPI_Comm world = MPI_COMM_NULL;  // our own duplicate of the world communicator
  MPI_Comm node = MPI_COMM_NULL;   // ranks of this (possibly pretended) node, ordered by world rank
  MPI_Comm rail = MPI_COMM_NULL;   // ranks with my local rank on every node, ordered by node
  int rank = 0, size = 1, local_rank = 0, local_size = 1, node_index = 0, nodes = 1;
  bool uniform = true;             // every node has the same number of ranks
  std::vector<int> order;          // world ranks by node, then local rank: 0..size-1 where every node
                                   // holds consecutive ranks (the canonical order is rank order)
  std::vector<int> groups;         // index into `order` where each node starts
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // Starts data[0,n) += (other ranks). `region` is where the job may live in the backend's
  // staging space (elements); jobs whose regions overlap never run at once. Returns a job id.
  virtual uint64_t submit(float* data, size_t n, size_t region) = 0;
  // Advances what it can without blocking; returns true when every submitted job is complete.
  virtual bool progress() = 0;
  // Jobs completed so far (ids below this are done).
  virtual uint64_t completed() const = 0;
  // No job will be submitted until all are complete: finish them (every rank calls it at the same
  // point; a backend may hold the last jobs back until then).
  virtual void flush() {}
  // Every rank calls this at the same point, after its own jobs are all complete (a step's
  // start): staging may then restart from its beginning, so a step's jobs land in the same
  // (cache-warm) staging space every step.
  virtual void restart_staging() {}
  // Largest single job (elements) and staging space (elements) the backend was built for.
  virtual size_t max_job() const = 0;
  virtual size_t region_space() const = 0;
  // Device memory (nccl only): starts data[0,n) += (other ranks) in place on the GPU, ordered after
  // the work queued so far on the compute stream (kernels/cuda/runtime.h); no host staging and no
  // host wait. Completes like a submitted job (progress / completed). Returns a job id.
  virtual uint64_t submit_device(float* /*data*/, size_t /*n*/) {
    throw std::logic_error(std::string(name()) + " backend: reduces host buffers only");
  }
  // Device jobs: the compute stream waits for every job submitted so far; the host does not.
  virtual void compute_wait() { throw std::logic_error(std::string(name()) + " backend: has no device jobs"); }
};

std::unique_ptr<Backend> make_mpi_backend(const Topology& t, WirePrecision p, size_t max_job);
std::unique_ptr<Backend> make_hierarchical_backend(const Topology& t, WirePrecision p, size_t window_elems,
                                                   size_t max_job);
// Host jobs staged through a device buffer, device jobs in place, on NCCL's own stream; the GPU is
// the process's device, local_rank % GPUs (comm/cuda/nccl_comm.h). Throws UserError where NCCL
// was not compiled in, no GPU is visible, or NCCL refuses (e.g. two ranks on one GPU).
std::unique_ptr<Backend> make_nccl_backend(const World& w, const Topology& t, WirePrecision p, size_t max_job);
int nccl_device_count();  // GPUs NCCL can use: 0 without NCCL in the build or without a GPU

// Jobs in flight, oldest first: a ring that grows only when a step submits more jobs than any
// step before it (so steady-state steps never allocate).
template <typename Job>
class JobRing {
 public:
  JobRing() : ring_(64) {}
  bool empty() const { return head_ == tail_; }
  size_t size() const { return tail_ - head_; }
  Job& at(size_t i) { return ring_[(head_ + i) % ring_.size()]; }  // i-th oldest
  Job& push() {
    if (size() == ring_.size()) {
      std::vector<Job> bigger(ring_.size() * 2);
      for (size_t i = 0; i < size(); ++i) bigger[i] = at(i);
      tail_ = size();
      head_ = 0;
      ring_.swap(bigger);
    }
    return ring_[tail_++ % ring_.size()];
  }
  void pop() { ++head_; }

 private:
  std::vector<Job> ring_;
  size_t head_ = 0, tail_ = 0;
};

// Progress helper for waits: spins; yields the core after a while only where this node runs more
// ranks than it has cores (set once by make_communicator).
void idle_wait(int& spins);
void set_idle_policy(int ranks_on_node);

}  // namespace mlpd
