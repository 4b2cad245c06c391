#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/cuda/nccl_comm.h"
#include "kernels/cuda/common.cuh"  // CUDA_CHECK, mlpd::cuda::fail
#include "kernels/cuda/runtime.h"   // the process's device and compute stream

// NCCL's message, plus its last error detail where it has one.
#define NCCL_CHECK(call)                                                                      \
  do {                                                                                        \
    const ncclResult_t mlpd_r_ = (call);                                                      \
    if (mlpd_r_ != ncclSuccess) ::mlpd::nccl::nccl_fail(__FILE__, __LINE__, #call, mlpd_r_); \
  } while (0)

namespace mlpd::nccl {

[[noreturn]] void nccl_fail(const char* file, int line, const char* call, ncclResult_t r) {
  std::string what = ncclGetErrorString(r);
  const char* last = ncclGetLastError(nullptr);
  if (last && *last) what += std::string(" (") + last + ")";
  ::mlpd::cuda::fail(file, line, call, what.c_str());
}

struct Ctx {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;        // NCCL's own stream
  cudaEvent_t after_compute = nullptr;  // recorded on the compute stream before each queued op
  // One event per op not yet seen complete, oldest at `head` (a ring that grows only when more
  // ops are in flight than ever before, so steady state creates no events).
  std::vector<cudaEvent_t> ring;
  size_t head = 0, pending = 0;
  uint64_t queued = 0, completed = 0;
  int rank = 0, size = 1, device = 0;
  float* staging = nullptr;  // allreduce_host_async only
  size_t staging_n = 0;
};

namespace {

cudaStream_t compute() { return static_cast<cudaStream_t>(::mlpd::cuda::compute_stream()); }

// The NCCL stream waits for the work queued so far on the compute stream.
void after_compute(Ctx* c) {
  CUDA_CHECK(cudaEventRecord(c->after_compute, compute()));
  CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->after_compute, 0));
}

// Marks the end of one op on the NCCL stream.
void record_done(Ctx* c) {
  if (c->pending == c->ring.size()) {  // every event is in flight: double the ring
    std::vector<cudaEvent_t> bigger(std::max<size_t>(16, 2 * c->ring.size()), nullptr);
    for (size_t i = 0; i < c->pending; ++i) bigger[i] = c->ring[(c->head + i) % c->ring.size()];
    for (size_t i = c->pending; i < bigger.size(); ++i) {
      const cudaError_t e = cudaEventCreateWithFlags(&bigger[i], cudaEventDisableTiming);
      if (e != cudaSuccess) {
        for (size_t k = c->pending; k < i; ++k) cudaEventDestroy(bigger[k]);
        CUDA_CHECK(e);
      }
    }
    c->ring.swap(bigger);
    c->head = 0;
  }
  CUDA_CHECK(cudaEventRecord(c->ring[(c->head + c->pending) % c->ring.size()], c->stream));
  ++c->pending;
  ++c->queued;
}

// The host has waited for the stream: every op is complete.
void all_complete(Ctx* c) {
  c->head = (c->head + c->pending) % std::max<size_t>(c->ring.size(), 1);
  c->pending = 0;
  c->completed = c->queued;
}

}  // namespace

Ctx* create(MPI_Comm comm, int local_rank) {
  const int ndev = ::mlpd::cuda::device_count();
  if (ndev == 0) throw std::runtime_error("no GPU visible (cudaGetDeviceCount)");
  auto* c = new Ctx;
  try {
    MPI_Comm_rank(comm, &c->rank);
    MPI_Comm_size(comm, &c->size);
    c->device = local_rank % ndev;
    ::mlpd::cuda::open_device(c->device);  // the compute ops' device and stream; cudaSetDevice
    ncclUniqueId id{};
    // Every rank reaches the MPI_Bcast even when rank 0's id failed (the error is raised after it),
    // so a failure cannot leave the others waiting in the broadcast.
    ncclResult_t id_rc = ncclSuccess;
    if (c->rank == 0) id_rc = ncclGetUniqueId(&id);
    if (MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm) != MPI_SUCCESS)
      throw std::runtime_error("MPI_Bcast of the NCCL id failed");
    NCCL_CHECK(id_rc);
    NCCL_CHECK(ncclCommInitRank(&c->comm, c->size, id, c->rank));
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&c->after_compute, cudaEventDisableTiming));
  } catch (...) {
    destroy(c);
    throw;
  }
  return c;
}

void destroy(Ctx* c) {
  if (!c) return;
  if (c->stream) cudaStreamSynchronize(c->stream);
  if (c->staging) cudaFree(c->staging);
  if (c->after_compute) cudaEventDestroy(c->after_compute);
  for (cudaEvent_t e : c->ring) cudaEventDestroy(e);
  if (c->stream) cudaStreamDestroy(c->stream);
  if (c->comm) ncclCommDestroy(c->comm);
  delete c;
}

void run(Ctx* c, Op op, const float* send, float* recv, size_t count, int root) {
  after_compute(c);
  switch (op) {
    case Op::allreduce: NCCL_CHECK(ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, c->comm, c->stream)); break;
    case Op::broadcast: NCCL_CHECK(ncclBroadcast(send, recv, count, ncclFloat32, root, c->comm, c->stream)); break;
    case Op::reduce_scatter:
      NCCL_CHECK(ncclReduceScatter(send, recv, count, ncclFloat32, ncclSum, c->comm, c->stream));
      break;
    case Op::allgather: NCCL_CHECK(ncclAllGather(send, recv, count, ncclFloat32, c->comm, c->stream)); break;
  }
  record_done(c);
}

void allreduce_host_async(Ctx* c, float* host, size_t n) {
  // One staging buffer: the previous job on it must be complete before it is reused.
  sync(c);
  if (n > c->staging_n) {
    if (c->staging) CUDA_CHECK(cudaFree(c->staging));
    c->staging = nullptr;
    c->staging_n = 0;
    CUDA_CHECK(cudaMalloc(&c->staging, n * sizeof(float)));
    c->staging_n = n;
  }
  CUDA_CHECK(cudaMemcpyAsync(c->staging, host, n * sizeof(float), cudaMemcpyHostToDevice, c->stream));
  NCCL_CHECK(ncclAllReduce(c->staging, c->staging, n, ncclFloat32, ncclSum, c->comm, c->stream));
  CUDA_CHECK(cudaMemcpyAsync(host, c->staging, n * sizeof(float), cudaMemcpyDeviceToHost, c->stream));
  record_done(c);
}

uint64_t queued(const Ctx* c) { return c->queued; }
uint64_t completed(const Ctx* c) { return c->completed; }

bool query(Ctx* c) {
  while (c->pending > 0) {
    const cudaError_t e = cudaEventQuery(c->ring[c->head]);
    if (e == cudaErrorNotReady) {
      // A peer that failed leaves the collective waiting forever: NCCL reports it here.
      ncclResult_t async = ncclSuccess;
      NCCL_CHECK(ncclCommGetAsyncError(c->comm, &async));
      if (async != ncclSuccess && async != ncclInProgress) NCCL_CHECK(async);
      return false;
    }
    CUDA_CHECK(e);
    c->head = (c->head + 1) % c->ring.size();
    --c->pending;
    ++c->completed;
  }
  return true;
}

void sync(Ctx* c) {
  CUDA_CHECK(cudaStreamSynchronize(c->stream));
  all_complete(c);
}

void compute_wait(Ctx* c) {
  if (c->pending == 0) return;  // all seen complete: nothing to wait for
  const cudaEvent_t newest = c->ring[(c->head + c->pending - 1) % c->ring.size()];
  CUDA_CHECK(cudaStreamWaitEvent(compute(), newest, 0));
}

}  // namespace mlpd::nccl
