// The emulator's NCCL: the calls comm/cuda makes, done with MPI on the emulated device memory
// (host memory). Streams are synchronous, so a collective completes in the call, as MPI's does.
// Every rank of MPI_COMM_WORLD must create its communicator together (the emulated unique id
// picks the group), which is how comm/cuda creates them.
#include <mpi.h>
#include <nccl.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/emulate/runtime_state.h"

struct ncclComm {
  MPI_Comm mpi = MPI_COMM_NULL;
  int rank = 0, size = 0;
};

namespace {

bool float32_sum(ncclDataType_t t) { return t == ncclFloat32; }

// A device-side buffer must be emulated device memory, as NCCL needs device pointers.
bool on_device(const void* p, size_t bytes) { return bytes == 0 || mlpd_emulate::is_device_range(p, bytes); }

}  // namespace

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id, 0, sizeof *id);
  std::random_device rd;
  const uint64_t token = (uint64_t(rd()) << 32) ^ rd();
  std::memcpy(id->internal, &token, sizeof token);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  uint64_t token = 0;
  std::memcpy(&token, id.internal, sizeof token);
  auto* c = new ncclComm;
  // Ranks holding the same id form the communicator, ordered by their NCCL rank.
  if (MPI_Comm_split(MPI_COMM_WORLD, int(token & 0x3fffffff), rank, &c->mpi) != MPI_SUCCESS) {
    delete c;
    return ncclSystemError;
  }
  MPI_Comm_rank(c->mpi, &c->rank);
  MPI_Comm_size(c->mpi, &c->size);
  if (c->size != nranks || c->rank != rank) {
    MPI_Comm_free(&c->mpi);
    delete c;
    return ncclInvalidUsage;
  }
  *comm = c;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm) {
    // A real NCCL communicator outlives MPI: a program may destroy it after MPI_Finalize.
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm->mpi);
    delete comm;
  }
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument (emulator)";
    case ncclInvalidUsage: return "invalid usage (emulator)";
    case ncclSystemError: return "system error (emulator)";
    default: return "error (emulator)";
  }
}

const char* ncclGetLastError(ncclComm_t) { return ""; }

ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* async) {
  *async = ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t) {
  if (!float32_sum(t) || op != ncclSum || !comm) return ncclInvalidArgument;
  if (!on_device(send, count * 4) || !on_device(recv, count * 4)) return ncclInvalidArgument;
  mlpd_emulate::note_queued_work();
  const int rc = MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, int(count), MPI_FLOAT, MPI_SUM, comm->mpi);
  return rc == MPI_SUCCESS ? ncclSuccess : ncclSystemError;
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t) {
  if (!float32_sum(t) || !comm || root < 0 || root >= comm->size) return ncclInvalidArgument;
  if ((comm->rank == root && !on_device(send, count * 4)) || !on_device(recv, count * 4)) return ncclInvalidArgument;
  if (comm->rank == root && send != recv) std::memmove(recv, send, count * 4);
  mlpd_emulate::note_queued_work();
  const int rc = MPI_Bcast(recv, int(count), MPI_FLOAT, root, comm->mpi);
  return rc == MPI_SUCCESS ? ncclSuccess : ncclSystemError;
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recvcount, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t) {
  if (!float32_sum(t) || op != ncclSum || !comm) return ncclInvalidArgument;
  if (!on_device(send, recvcount * 4 * size_t(comm->size)) || !on_device(recv, recvcount * 4))
    return ncclInvalidArgument;
  // In place (recv inside send) is allowed by NCCL: reduce from a copy.
  std::vector<float> in(static_cast<const float*>(send), static_cast<const float*>(send) + recvcount * comm->size);
  mlpd_emulate::note_queued_work();
  const int rc = MPI_Reduce_scatter_block(in.data(), recv, int(recvcount), MPI_FLOAT, MPI_SUM, comm->mpi);
  return rc == MPI_SUCCESS ? ncclSuccess : ncclSystemError;
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t sendcount, ncclDataType_t t, ncclComm_t comm,
                           cudaStream_t) {
  if (!float32_sum(t) || !comm) return ncclInvalidArgument;
  if (!on_device(send, sendcount * 4) || !on_device(recv, sendcount * 4 * size_t(comm->size)))
    return ncclInvalidArgument;
  std::vector<float> in(static_cast<const float*>(send), static_cast<const float*>(send) + sendcount);
  mlpd_emulate::note_queued_work();
  const int rc = MPI_Allgather(in.data(), int(sendcount), MPI_FLOAT, recv, int(sendcount), MPI_FLOAT, comm->mpi);
  return rc == MPI_SUCCESS ? ncclSuccess : ncclSystemError;
}
