// NCCL, behind a plain C++17 interface (the .cu side is compiled by nvcc as C++17; no CUDA or NCCL
// types leak out). Built only when CUDA and NCCL are found (MLPD_HAVE_NCCL).
//
// One NCCL communicator per context: the id is created on rank 0 and broadcast over MPI. The GPU is
// the process's device (kernels/cuda/runtime.h): create() opens GPU local_rank % GPUs there, so the
// compute ops and NCCL use the same device. NCCL work runs on the context's own stream; every call
// that queues work first records an event on the compute stream (mlpd::cuda::compute_stream()) and
// makes the NCCL stream wait for it, so the collective sees everything the compute stream had
// queued at that moment (e.g. the gradients of backward so far). compute_wait() is the way back:
// the compute stream waits for the NCCL work queued so far, the host does not.
//
// Nothing here waits on the host except sync() and the staged host allreduce's buffer reuse. All
// failures throw std::runtime_error naming the call, its file:line and the library's message.
#pragma once
#include <mpi.h>

#include <cstddef>
#include <cstdint>

namespace mlpd::nccl {

struct Ctx;
// Collective over `comm`. Opens GPU local_rank % GPUs as the process's device (a no-op when that
// device is already open). Throws std::runtime_error (no GPU, NCCL refuses: e.g. two ranks on one GPU).
Ctx* create(MPI_Comm comm, int local_rank);
void destroy(Ctx* c);  // waits for the context's queued work; nullptr is fine

enum class Op { allreduce, broadcast, reduce_scatter, allgather };
// Device buffers, nccl-tests semantics: count = elements of the op's (larger) buffer for
// allreduce/broadcast, per-rank recv count for reduce_scatter, per-rank send count for allgather.
// send == recv is in place. Queued after the compute stream's work so far; not waited for.
void run(Ctx* c, Op op, const float* send, float* recv, size_t count, int root);
// Host buffer, staged through the context's device buffer (grown once to the largest n): queued
// after the context's earlier work, not waited for; the host buffer must stay untouched until
// query() says done (or sync()). The next call waits for this one (one staging buffer).
void allreduce_host_async(Ctx* c, float* host, size_t n);
// Every call above that queues work is one op, numbered from 0 in call order; ops complete in
// that order (one stream), each marked by its own event.
uint64_t queued(const Ctx* c);     // ops queued so far (the next op's number)
uint64_t completed(const Ctx* c);  // ops seen complete so far (by query or sync)
// Advances completed() by cudaEventQuery over the oldest ops; true when every queued op is
// complete. NCCL's own asynchronous errors (e.g. a peer that failed) are raised here. Never blocks.
bool query(Ctx* c);
void sync(Ctx* c);  // the host waits for everything queued so far
// The compute stream waits (cudaStreamWaitEvent) for everything queued so far on the NCCL stream:
// work queued on it next sees the results. The host does not wait.
void compute_wait(Ctx* c);

}  // namespace mlpd::nccl
