#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/cuda/nccl_comm.h"

#define CUDA_CHECK(call)                                                                             \
  do {                                                                                               \
    cudaError_t e_ = (call);                                                                         \
    if (e_ != cudaSuccess)                                                                           \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " #call \
                               " failed: " + cudaGetErrorString(e_));                                \
  } while (0)
#define NCCL_CHECK(call)                                                                             \
  do {                                                                                               \
    ncclResult_t r_ = (call);                                                                        \
    if (r_ != ncclSuccess)                                                                           \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " #call \
                               " failed: " + ncclGetErrorString(r_));                                \
  } while (0)

namespace mlpd::nccl {

struct Ctx {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t after_compute = nullptr;
  cudaEvent_t done = nullptr;
  int rank = 0, size = 1, device = 0;
  float* staging = nullptr;
  size_t staging_n = 0;
};

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "insufficient driver" error
    return 0;
  }
  return n;
}

Ctx* create(MPI_Comm comm, int local_rank) {
  int ndev = device_count();
  if (ndev == 0) throw std::runtime_error("NCCL backend: no GPU visible (cudaGetDeviceCount)");
  auto* c = new Ctx;
  MPI_Comm_rank(comm, &c->rank);
  MPI_Comm_size(comm, &c->size);
  c->device = local_rank % ndev;
  CUDA_CHECK(cudaSetDevice(c->device));
  ncclUniqueId id;
  if (c->rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  if (MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm) != MPI_SUCCESS) throw std::runtime_error("MPI_Bcast of the NCCL id failed");
  NCCL_CHECK(ncclCommInitRank(&c->comm, c->size, id, c->rank));
  CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&c->after_compute, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming));
  return c;
}

void destroy(Ctx* c) {
  if (!c) return;
  cudaStreamSynchronize(c->stream);
  if (c->staging) cudaFree(c->staging);
  cudaEventDestroy(c->after_compute);
  cudaEventDestroy(c->done);
  cudaStreamDestroy(c->stream);
  ncclCommDestroy(c->comm);
  delete c;
}

void run(Ctx* c, Op op, const float* send, float* recv, size_t count, int root, void* compute_stream) {
  CUDA_CHECK(cudaEventRecord(c->after_compute, static_cast<cudaStream_t>(compute_stream)));
  CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->after_compute, 0));
  switch (op) {
    case Op::allreduce: NCCL_CHECK(ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, c->comm, c->stream)); break;
    case Op::broadcast: NCCL_CHECK(ncclBroadcast(send, recv, count, ncclFloat32, root, c->comm, c->stream)); break;
    case Op::reduce_scatter:
      NCCL_CHECK(ncclReduceScatter(send, recv, count, ncclFloat32, ncclSum, c->comm, c->stream));
      break;
    case Op::allgather: NCCL_CHECK(ncclAllGather(send, recv, count, ncclFloat32, c->comm, c->stream)); break;
  }
  CUDA_CHECK(cudaEventRecord(c->done, c->stream));
}

void allreduce_host_async(Ctx* c, float* host, size_t n) {
  if (n > c->staging_n) {
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    if (c->staging) CUDA_CHECK(cudaFree(c->staging));
    CUDA_CHECK(cudaMalloc(&c->staging, n * sizeof(float)));
    c->staging_n = n;
  }
  CUDA_CHECK(cudaMemcpyAsync(c->staging, host, n * sizeof(float), cudaMemcpyHostToDevice, c->stream));
  NCCL_CHECK(ncclAllReduce(c->staging, c->staging, n, ncclFloat32, ncclSum, c->comm, c->stream));
  CUDA_CHECK(cudaMemcpyAsync(host, c->staging, n * sizeof(float), cudaMemcpyDeviceToHost, c->stream));
  CUDA_CHECK(cudaEventRecord(c->done, c->stream));
}

bool query(Ctx* c) {
  cudaError_t e = cudaEventQuery(c->done);
  if (e == cudaErrorNotReady) return false;
  CUDA_CHECK(e);
  return true;
}

void sync(Ctx* c) { CUDA_CHECK(cudaStreamSynchronize(c->stream)); }

void* device_alloc(size_t bytes) {
  void* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, bytes));
  return p;
}
void device_free(void* p) { cudaFree(p); }
void copy_to_device(void* dst, const void* src, size_t bytes) { CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice)); }
void copy_to_host(void* dst, const void* src, size_t bytes) { CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost)); }

}  // namespace mlpd::nccl
