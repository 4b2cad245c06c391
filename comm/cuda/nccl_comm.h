// NCCL, behind a plain C++17 interface (the .cu side is compiled by nvcc as C++17; no CUDA or NCCL
// types leak out). One communicator per job: the NCCL id is created on rank 0 and broadcast over
// MPI; work runs on the communicator's own stream, ordered after the caller's compute stream with
// an event. Built only when CUDA and NCCL are found (MLPD_HAVE_NCCL).
#pragma once
#include <mpi.h>

#include <cstddef>

namespace mlpd::nccl {

int device_count();  // 0 on any error (no driver, no GPU)

struct Ctx;
// Collective over `comm`; picks device local_rank % device_count(). Throws std::runtime_error.
Ctx* create(MPI_Comm comm, int local_rank);
void destroy(Ctx* c);

enum class Op { allreduce, broadcast, reduce_scatter, allgather };
// Device buffers, nccl-tests semantics: count = elements of the op's (larger) buffer for
// allreduce/broadcast, per-rank recv count for reduce_scatter, per-rank send count for allgather.
// Ordered after work already queued on `compute_stream` (a cudaStream_t; nullptr = legacy stream).
void run(Ctx* c, Op op, const float* send, float* recv, size_t count, int root, void* compute_stream);
// Host buffer, staged through the context's device buffer (grown once to the largest n): queued,
// not waited for. query() says whether everything queued so far is complete; sync() waits.
void allreduce_host_async(Ctx* c, float* host, size_t n);
bool query(Ctx* c);
void sync(Ctx* c);

void* device_alloc(size_t bytes);
void device_free(void* p);
void copy_to_device(void* dst, const void* src, size_t bytes);
void copy_to_host(void* dst, const void* src, size_t bytes);

}  // namespace mlpd::nccl
