// Backend `nccl` (comm/cuda/nccl_comm.h), on NCCL's own stream on the process's GPU:
//   device jobs (submit_device): the gradient buckets of a store on the GPU, reduced in place,
//     each ordered after the compute stream's work queued when it was submitted;
//   host jobs (submit): a host range staged through one device buffer (allreduce_sum of host
//     values, and a host store with --comm-backend nccl).
// Job ids are NCCL's op numbers: one op per job, completed in order, each marked by its own event.
// NCCL sums in its own (ring/tree) order: exact for integer-valued data, but not bit-identical to
// the host backends' canonical order.
#include <stdexcept>
#include <string>

#include "comm/backend.h"
#include "core/check.h"
#include "kernels/device.h"
#ifdef MLPD_HAVE_NCCL
#include "comm/cuda/nccl_comm.h"
#endif

namespace mlpd {

#ifdef MLPD_HAVE_NCCL
int nccl_device_count() { return cuda_device_count(); }

namespace {
class NcclBackend final : public Backend {
 public:
  NcclBackend(const World& w, const Topology& t, size_t max_job) : max_job_(max_job) {
    try {
      ctx_ = nccl::create(t.world, w.local_rank);
    } catch (const std::exception& e) {
      std::string hint;
      const int gpus = cuda_device_count();
      if (gpus < w.local_size)
        hint = " (" + std::to_string(w.local_size) + " ranks on this node, " + std::to_string(gpus) +
               " GPU(s) visible to this rank: NCCL needs a GPU of its own for every rank)";
      throw UserError(std::string("nccl backend: ") + e.what() + hint);
    }
  }
  ~NcclBackend() override { nccl::destroy(ctx_); }
  NcclBackend(const NcclBackend&) = delete;
  NcclBackend& operator=(const NcclBackend&) = delete;
  const char* name() const override { return "nccl"; }
  size_t max_job() const override { return max_job_; }
  size_t region_space() const override { return max_job_; }
  uint64_t completed() const override { return nccl::completed(ctx_); }
  uint64_t submit(float* data, size_t n, size_t /*region*/) override {
    const uint64_t id = nccl::queued(ctx_);
    nccl::allreduce_host_async(ctx_, data, n);  // waits for the previous job (one staging buffer)
    return id;
  }
  uint64_t submit_device(float* data, size_t n) override {
    const uint64_t id = nccl::queued(ctx_);
    nccl::run(ctx_, nccl::Op::allreduce, data, data, n, 0);
    return id;
  }
  bool progress() override { return nccl::query(ctx_); }
  void compute_wait() override { nccl::compute_wait(ctx_); }

 private:
  nccl::Ctx* ctx_ = nullptr;
  size_t max_job_;
};
}  // namespace

std::unique_ptr<Backend> make_nccl_backend(const World& w, const Topology& t, WirePrecision p, size_t max_job) {
  if (p != WirePrecision::fp32) throw UserError("nccl backend: only fp32 on the wire is implemented");
  if (cuda_device_count() == 0) throw UserError("nccl backend: no GPU visible on this machine");
  return std::make_unique<NcclBackend>(w, t, max_job);
}
#else
int nccl_device_count() { return 0; }
std::unique_ptr<Backend> make_nccl_backend(const World&, const Topology&, WirePrecision, size_t) {
  throw UserError("nccl backend: this build has no CUDA/NCCL (configure where nvcc and NCCL are found)");
}
#endif

}  // namespace mlpd
