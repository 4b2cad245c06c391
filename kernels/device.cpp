#include "kernels/device.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "core/check.h"
#ifdef MLPD_HAVE_CUDA
#include "kernels/cuda/runtime.h"
#endif

namespace mlpd {

namespace {
void free_host(std::byte* p) { std::free(p); }
#ifdef MLPD_HAVE_CUDA
void free_cuda(std::byte* p) { cuda::free_device(p); }
void free_pinned(std::byte* p) { cuda::free_pinned(p); }
#endif

[[noreturn, maybe_unused]] void no_cuda() {
  throw UserError("--device cuda: this build has no CUDA (configure where nvcc, cuBLAS and NCCL are found)");
}

DeviceBytes host_bytes(size_t bytes) {
  // 64-byte aligned like the Arena, so vector kernels see the same alignment on every buffer.
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = rounded ? std::aligned_alloc(64, rounded) : nullptr;
  if (rounded && !p) throw std::bad_alloc();
  if (p) std::memset(p, 0, rounded);
  return DeviceBytes(static_cast<std::byte*>(p), free_host);
}
}  // namespace

Device parse_device(const std::string& s) {
  if (s == "cpu") return Device::cpu;
  if (s == "cuda") return Device::cuda;
  throw UserError("--device: '" + s + "' is not a device (cpu or cuda)", 2);
}

const char* device_name(Device d) { return d == Device::cuda ? "cuda" : "cpu"; }

int cuda_device_count() {
#ifdef MLPD_HAVE_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

bool cuda_ops_built() {
#ifdef MLPD_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

DeviceContext open_device(Device d, int local_rank) {
  DeviceContext ctx;
  if (d == Device::cpu) {
    ctx.description = "cpu";
    return ctx;
  }
#ifdef MLPD_HAVE_CUDA
  const int n = cuda::device_count();
  if (n == 0) throw UserError("--device cuda: no GPU is visible on this machine (cudaGetDeviceCount)");
  ctx.device = Device::cuda;
  ctx.ordinal = local_rank % n;
  try {
    ctx.description = "cuda:" + std::to_string(ctx.ordinal) + " " + cuda::open_device(ctx.ordinal);
  } catch (const std::runtime_error& e) {
    throw UserError(std::string("--device cuda: ") + e.what());
  }
  ctx.ops = &cuda_ops();
  return ctx;
#else
  (void)local_rank;
  no_cuda();
#endif
}

void close_device(const DeviceContext& d) {
#ifdef MLPD_HAVE_CUDA
  if (d.device == Device::cuda) cuda::close_device();
#else
  (void)d;
#endif
}

DeviceBytes alloc_on(Device d, size_t bytes) {
  if (d == Device::cpu) return host_bytes(bytes);
#ifdef MLPD_HAVE_CUDA
  return DeviceBytes(static_cast<std::byte*>(cuda::malloc_zeroed(bytes)), free_cuda);
#else
  no_cuda();
#endif
}

DeviceBytes alloc_staging(Device d, size_t bytes) {
  if (d == Device::cpu) return host_bytes(bytes);
#ifdef MLPD_HAVE_CUDA
  auto* p = static_cast<std::byte*>(cuda::malloc_pinned(bytes));
  if (p) std::memset(p, 0, bytes);
  return DeviceBytes(p, free_pinned);
#else
  no_cuda();
#endif
}

void copy_to_device(Device d, void* dst, const void* src, size_t bytes) {
  if (d == Device::cpu) {
    if (bytes) std::memmove(dst, src, bytes);
    return;
  }
#ifdef MLPD_HAVE_CUDA
  cuda::copy_to_device_async(dst, src, bytes);
#else
  no_cuda();
#endif
}

void copy_to_host(Device d, void* dst, const void* src, size_t bytes) {
  if (d == Device::cpu) {
    if (bytes) std::memmove(dst, src, bytes);
    return;
  }
#ifdef MLPD_HAVE_CUDA
  cuda::copy_to_host(dst, src, bytes);
#else
  no_cuda();
#endif
}

void copy_within(Device d, void* dst, const void* src, size_t bytes) {
  if (d == Device::cpu) {
    if (bytes) std::memmove(dst, src, bytes);
    return;
  }
#ifdef MLPD_HAVE_CUDA
  cuda::copy_on_device_async(dst, src, bytes);
#else
  no_cuda();
#endif
}

void zero_on(Device d, void* p, size_t bytes) {
  if (d == Device::cpu) {
    if (bytes) std::memset(p, 0, bytes);
    return;
  }
#ifdef MLPD_HAVE_CUDA
  cuda::zero_async(p, bytes);
#else
  no_cuda();
#endif
}

void synchronize(Device d) {
#ifdef MLPD_HAVE_CUDA
  if (d == Device::cuda) cuda::synchronize();
#else
  (void)d;
#endif
}

float* DeviceBuffers::floats(size_t n) {
  bytes += n * sizeof(float);
  if (device == Device::cpu) {
    host.emplace_back(n, 0.0f);
    return host.back().data();
  }
  on_device.push_back(alloc_on(device, n * sizeof(float)));
  return as<float>(on_device.back());
}

uint16_t* DeviceBuffers::halves(size_t n) {
  return reinterpret_cast<uint16_t*>(floats((n + 1) / 2));
}

void place_store_on(ParamStore& s, Device d) {
  MLPD_CHECK(s.finalized, "place_store_on before finalize_params");
  if (d == Device::cpu || s.device == d) return;
  const size_t floats = 2 * s.param_count + s.state_count;
  s.device_memory = alloc_on(d, floats * sizeof(float));
  s.device_params = as<float>(s.device_memory);
  s.device_grads = s.device_params + s.param_count;
  s.device_state = s.device_grads + s.param_count;
  s.device = d;
  upload_store(s);
  std::vector<float>().swap(s.grads);
}

void upload_store(ParamStore& s) {
  if (!on_device(s)) return;
  copy_to_device(s.device, s.device_params, s.params.data(), s.param_count * sizeof(float));
  copy_to_device(s.device, s.device_state, s.state.data(), s.state_count * sizeof(float));
}

void download_store(ParamStore& s) {
  if (!on_device(s)) return;
  copy_to_host(s.device, s.params.data(), s.device_params, s.param_count * sizeof(float));
  copy_to_host(s.device, s.state.data(), s.device_state, s.state_count * sizeof(float));
}

void zero_grads(ParamStore& s) { zero_on(s.device, grads_data(s), s.param_count * sizeof(float)); }

void arena_init_on(Device d, Arena& a, size_t bytes) {
  if (d == Device::cpu) {
    arena_init(a, bytes);
    return;
  }
  a.base = alloc_on(d, bytes);
  a.capacity = bytes;
  a.offset = 0;
}

}  // namespace mlpd
