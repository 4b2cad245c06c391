#include "comm/bench/path.h"

#include <algorithm>
#include <cstdio>

#include "kernels/device.h"

namespace mlpd::comm_bench {

namespace {

// Views of 256 KiB (a mid-size layer), in forward order, 16-float multiples so there is no
// padding: the gradient buffer is exactly `count` floats, like the plain paths' buffers.
constexpr size_t kViewFloats = 65536;

void add_gradient_views(ParamStore& store, size_t count) {
  for (size_t offset = 0, k = 0; offset < count; offset += kViewFloats, ++k) {
    char name[32];
    std::snprintf(name, sizeof name, "v%zu", k);
    add_param(store, name, std::min(kViewFloats, count - offset), ParamKind::weight);
  }
  finalize_params(store);
}

bool on_gpu(const SizeRun& r) { return r.device == Device::cuda; }

// Where this rank's inputs are written on the host (copied up from there on the GPU paths).
float* inputs(SizeRun& r) {
  return r.kind == PathKind::bucketed && !on_gpu(r) ? r.store.grads.data() : r.send.data();
}

// Where this rank's result is on the host after run_once (after the copy back, on the GPU paths).
float* result(SizeRun& r) {
  if (r.kind == PathKind::bucketed || r.kind == PathKind::communicator) return inputs(r);  // in place
  return r.op->in_place ? r.send.data() : r.recv.data();
}

// The GPU paths' device buffers: the inputs, and where the result lands.
float* device_inputs(SizeRun& r) {
  return r.kind == PathKind::bucketed ? grads_data(r.store) : as<float>(r.device_send);
}
float* device_result(SizeRun& r) {
  if (r.kind == PathKind::bucketed || r.op->in_place) return device_inputs(r);
  return as<float>(r.device_recv);
}

// Gradient step of the bucketed path; with compute, one slice before each view is ready, as in
// a backward that produces the last layer's gradient first.
void bucketed_step(SizeRun& r, ComputeKernel* cpu, double iters) {
  grads_begin_step(*r.comm);
  const size_t views = r.store.views.size();
  for (size_t v = views; v > 0; --v) {
    if (cpu) cpu->run(iters / static_cast<double>(views));
    grad_ready(*r.comm, r.store, v - 1);
  }
  grads_finish_step(*r.comm, r.store);
  // On the GPU the compute stream now waits for the last bucket: the step is done when it is.
  if (on_gpu(r)) synchronize(Device::cuda);
}

#ifdef MLPD_HAVE_NCCL
void run_nccl(SizeRun& r) {
  const size_t count = r.op->per_rank_blocks ? per_rank_block(*r.world, r.count) : r.count;
  nccl::run(r.nccl_ctx, r.op->nccl_op, device_inputs(r), device_result(r), count, 0);
  nccl::sync(r.nccl_ctx);
}
#endif

}  // namespace

std::unique_ptr<SizeRun> open_size(World& w, const Collective& op, PathKind kind, Device device, const CommConfig& cfg,
                                   nccl::Ctx* nccl_ctx, size_t count) {
  auto r = std::make_unique<SizeRun>();
  r->world = &w;
  r->op = &op;
  r->kind = kind;
  r->device = kind == PathKind::nccl ? Device::cuda : device;
  r->count = count;
  if (kind == PathKind::bucketed) add_gradient_views(r->store, count);
  if (kind != PathKind::bucketed || on_gpu(*r)) r->send.assign(count, 0.0f);
  if (kind == PathKind::bucketed && on_gpu(*r)) place_store_on(r->store, Device::cuda);
  if (kind == PathKind::mpi || kind == PathKind::nccl) r->recv.assign(count, 0.0f);
  if (kind == PathKind::bucketed || kind == PathKind::communicator) r->comm = make_communicator(w, cfg, r->store);
  if (kind == PathKind::nccl) {
    r->nccl_ctx = nccl_ctx;
    r->device_send = alloc_on(Device::cuda, count * sizeof(float));
    r->device_recv = alloc_on(Device::cuda, count * sizeof(float));
  }
  return r;
}

void fill_inputs(SizeRun& r) {
  r.op->fill(*r.world, inputs(r), r.count);
  if (on_gpu(r)) {
    copy_to_device(Device::cuda, device_inputs(r), inputs(r), r.count * sizeof(float));
    synchronize(Device::cuda);  // the copy stays out of the timed run
  }
}

void run_once(SizeRun& r) {
  switch (r.kind) {
    case PathKind::mpi:
      r.op->run_mpi(*r.world, r.send.data(), r.recv.data(), r.count);
      break;
    case PathKind::communicator:
      allreduce_sum(*r.comm, r.send.data(), r.count);
      break;
    case PathKind::bucketed:
      bucketed_step(r, nullptr, 0);
      break;
    case PathKind::nccl:
#ifdef MLPD_HAVE_NCCL
      run_nccl(r);
#endif
      break;
  }
}

bool overlappable(const SizeRun& r) {
  if (on_gpu(r)) return false;  // the compute kernel is a host one
  if (r.kind == PathKind::mpi) return r.op->start_mpi != nullptr;
  return r.kind == PathKind::communicator || r.kind == PathKind::bucketed;
}

void run_overlapped(SizeRun& r, ComputeKernel& cpu, double iters) {
  if (r.kind == PathKind::bucketed) return bucketed_step(r, &cpu, iters);
  const bool plain_mpi = r.kind == PathKind::mpi;
  if (plain_mpi)
    r.request = r.op->start_mpi(*r.world, r.send.data(), r.recv.data(), r.count);
  else
    allreduce_sum_start(*r.comm, r.send.data(), r.count);
  const int slices = 32;
  for (int s = 0; s < slices; ++s) {
    cpu.run(iters / slices);
    if (!plain_mpi) {
      comm_progress(*r.comm);
    } else if (r.request != MPI_REQUEST_NULL) {
      int done = 0;
      MPI_CHECK(MPI_Test(&r.request, &done, MPI_STATUS_IGNORE));
    }
  }
  if (plain_mpi)
    MPI_CHECK(MPI_Wait(&r.request, MPI_STATUS_IGNORE));
  else
    allreduce_sum_wait(*r.comm);
}

long long count_wrong(SizeRun& r, bool corrupt_for_test) {
  float* out = result(r);
  if (on_gpu(r)) copy_to_host(Device::cuda, out, device_result(r), r.count * sizeof(float));
  if (corrupt_for_test && r.world->rank == 0) out[0] += 1.0f;
  return r.op->count_wrong(*r.world, out, r.count);
}

}  // namespace mlpd::comm_bench
