// Backend `nccl`: host jobs staged through one device buffer and reduced by NCCL on its own
// stream (comm/cuda/nccl_comm.cu). Device-resident gradients use nccl::run() directly. NCCL sums
// in its own (ring/tree) order: results are exact for integer-valued data but not bit-identical
// to the host backends' canonical order.
#include <stdexcept>

#include "comm/backend.h"
#include "core/check.h"
#ifdef MLPD_HAVE_NCCL
#include "comm/cuda/nccl_comm.h"
#endif

namespace mlpd {

#ifdef MLPD_HAVE_NCCL
int nccl_device_count() { return nccl::device_count(); }

namespace {
class NcclBackend final : public Backend {
 public:
  NcclBackend(const World& w, const Topology& t, size_t max_job) : max_job_(max_job) {
    try {
      ctx_ = nccl::create(t.world, w.local_rank);
    } catch (const std::exception& e) {
      throw UserError(std::string("nccl backend: ") + e.what());
    }
  }
  ~NcclBackend() override { nccl::destroy(ctx_); }
  const char* name() const override { return "nccl"; }
  size_t max_job() const override { return max_job_; }
  size_t region_space() const override { return max_job_; }
  uint64_t completed() const override { return completed_; }
  uint64_t submit(float* data, size_t n, size_t /*region*/) override {
    // One staging buffer: the previous job must be complete before it is reused.
    nccl::sync(ctx_);
    completed_ = submitted_;
    nccl::allreduce_host_async(ctx_, data, n);
    return submitted_++;
  }
  bool progress() override {
    if (completed_ < submitted_ && nccl::query(ctx_)) completed_ = submitted_;
    return completed_ == submitted_;
  }

 private:
  nccl::Ctx* ctx_ = nullptr;
  size_t max_job_;
  uint64_t submitted_ = 0, completed_ = 0;
};
}  // namespace

std::unique_ptr<Backend> make_nccl_backend(const World& w, const Topology& t, WirePrecision p, size_t max_job) {
  if (p != WirePrecision::fp32) throw UserError("nccl backend: only fp32 on the wire is implemented");
  if (nccl::device_count() == 0) throw UserError("nccl backend: no GPU visible on this machine");
  return std::make_unique<NcclBackend>(w, t, max_job);
}
#else
int nccl_device_count() { return 0; }
std::unique_ptr<Backend> make_nccl_backend(const World&, const Topology&, WirePrecision, size_t) {
  throw UserError("nccl backend: this build has no CUDA/NCCL (configure where nvcc and NCCL are found)");
}
#endif

}  // namespace mlpd
