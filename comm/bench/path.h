// How comm-bench runs one size of one collective, on one of four paths:
//   mpi           the collective's own plain MPI call, out of place (the baseline)
//   communicator  allreduce of one buffer through the communicator's backend (--backend hierarchical)
//   bucketed      exactly the trainer's step: a flat gradient buffer cut into 256 KiB views,
//                 bucketed, grad_ready in reverse view order (--bucketed, --side-by-side); with
//                 --device cuda the ParamStore is on the GPU (place_store_on) and the communicator
//                 reduces its device buckets through NCCL
//   nccl          the collective on device buffers through NCCL (--device cuda, --backend nccl)
// The communicator paths run allreduce only (the harness checks the options before this).
// Buffers, communicators and device memory are allocated when a size is opened, never while it
// is timed. On the GPU paths the inputs are filled on the host and copied up before the timed run
// (untimed), the result is copied back for the check; a timed run ends when the GPU is done.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "comm/bench/collective.h"
#include "comm/bench/timing.h"
#include "comm/communicator.h"
#include "core/param_store.h"
#include "core/tensor.h"

namespace mlpd::comm_bench {

enum class PathKind { mpi, communicator, bucketed, nccl };

// One size of one collective on one path: its buffers and their owners.
struct SizeRun {
  World* world = nullptr;
  const Collective* op = nullptr;
  PathKind kind = PathKind::mpi;
  Device device = Device::cpu;             // cuda: nccl, and bucketed over a store on the GPU
  size_t count = 0;                        // floats in the op's larger buffer
  // Host: mpi; communicator (send, in place); the GPU paths' inputs and results (fill and check).
  std::vector<float> send, recv;
  ParamStore store;                        // bucketed: the flat gradient buffer and its views
  std::unique_ptr<Communicator> comm;      // communicator, bucketed
  MPI_Request request = MPI_REQUEST_NULL;  // mpi, overlap mode: the collective in flight
  nccl::Ctx* nccl_ctx = nullptr;           // nccl: the sweep's communicator (not owned)
  DeviceBytes device_send = no_device_bytes(), device_recv = no_device_bytes();  // nccl (kernels/device.h)
};

// Allocates the size's buffers (collective over w for the communicator paths and NCCL). Device::cuda
// (nccl, bucketed) needs the process's GPU open (kernels/device.h: open_device).
std::unique_ptr<SizeRun> open_size(World& w, const Collective& op, PathKind kind, Device device, const CommConfig& cfg,
                                   nccl::Ctx* nccl_ctx, size_t count);
void fill_inputs(SizeRun& r);  // untimed: (re)writes the inputs; the in-place paths need it before every run
void run_once(SizeRun& r);     // timed: the collective once, complete when it returns

// Overlap mode (OSU style, host paths only): the collective started, `iters` of compute run with
// progress calls in between (per view on the bucketed path, else 32 slices), then waited for.
bool overlappable(const SizeRun& r);
void run_overlapped(SizeRun& r, ComputeKernel& cpu, double iters);

// Wrong elements of this rank's result. corrupt_for_test: rank 0 alters one result element first,
// a control that the check does see a wrong answer.
long long count_wrong(SizeRun& r, bool corrupt_for_test);

}  // namespace mlpd::comm_bench
