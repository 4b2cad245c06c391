// The run's device: the CPU, or one GPU per rank chosen by local rank. Everything a model owns
// (parameters, gradients, optimizer state, activations, scratch) is allocated here on that device;
// the host touches device memory only through these copies (input batches in, logged values out).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <deque>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/param_store.h"
#include "core/tensor.h"
#include "kernels/op_table.h"

namespace mlpd {

Device parse_device(const std::string& s);  // "cpu" | "cuda"; UserError otherwise
const char* device_name(Device d);
// GPUs this process can use: 0 where the build has no CUDA or the machine no GPU.
int cuda_device_count();
bool cuda_ops_built();  // this build has the CUDA ops (nvcc, cuBLAS and NCCL were found)

struct DeviceContext {
  Device device = Device::cpu;
  int ordinal = -1;          // the GPU (cuda only): local_rank % GPUs on the node
  std::string description;   // for the log: "cpu", "cuda:0 NVIDIA H200 (sm_90, 139.8 GiB)"
  const OpTable* ops = &cpu_ops();
};

// CUDA: selects the GPU and creates its compute stream and cuBLAS/cuDNN handles (once per
// process). Throws UserError where the build has no CUDA or no GPU is visible.
DeviceContext open_device(Device d, int local_rank);
void close_device(const DeviceContext& d);

// Bytes on a device, zeroed (DeviceBytes: core/tensor.h).
DeviceBytes alloc_on(Device d, size_t bytes);
// Host memory for batches copied to `d`: page-locked on CUDA (so the copy overlaps compute).
DeviceBytes alloc_staging(Device d, size_t bytes);
template <typename T>
T* as(const DeviceBytes& b) {
  return reinterpret_cast<T*>(b.get());
}

// A model's buffers on its device, zeroed, with stable addresses, freed with the model. On the CPU
// they are plain vectors, as they always were (the CPU results do not depend on this change).
struct DeviceBuffers {
  Device device = Device::cpu;
  std::deque<std::vector<float>> host;
  std::vector<DeviceBytes> on_device;
  size_t bytes = 0;  // all of them together: what a model's activations take (bench_train prints it)
  float* floats(size_t n);
  uint16_t* halves(size_t n);  // room for n bf16 values (--precision bf16 storage)
};

// Copies between host and `d` (plain memcpy on the CPU). to_device is queued behind the compute
// already issued; to_host waits for it. zero and copy_within stay on the device.
void copy_to_device(Device d, void* dst, const void* src, size_t bytes);
void copy_to_host(Device d, void* dst, const void* src, size_t bytes);
void copy_within(Device d, void* dst, const void* src, size_t bytes);
void zero_on(Device d, void* p, size_t bytes);
void synchronize(Device d);

// Host data where `d`'s ops read it: `host` itself on the CPU, else a copy of its n elements
// queued into `device` (a buffer on `d`), which is returned.
template <typename T>
const T* visible_on(Device d, const T* host, T* device, size_t n) {
  if (d == Device::cpu) return host;
  copy_to_device(d, device, host, n * sizeof(T));
  return device;
}  // waits for the device's queued work (nothing on the CPU)
// An Arena whose memory is on `d` (CPU: arena_init).
void arena_init_on(Device d, Arena& a, size_t bytes);

// Moves a finalized store's working buffers to `d` (nothing on the CPU): params and state are
// copied up, gradients start at zero, and the host `grads` vector is released.
void place_store_on(ParamStore& s, Device d);
// Host mirrors -> device (after the host params/state were set: broadcast, checkpoint load).
void upload_store(ParamStore& s);
// Device -> host mirrors `params` and `state` (before a checkpoint, a fingerprint, a dump).
void download_store(ParamStore& s);
// Zeroes the gradients on their device.
void zero_grads(ParamStore& s);

}  // namespace mlpd
