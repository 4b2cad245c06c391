// What the emulator's runtime (runtime_api.cpp) and its scheduler (threads.cpp) share.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace mlpd_emulate {

[[noreturn]] void die(const char* what);  // prints "cuda emulator: what" and aborts
void set_last_error(cudaError_t e);
size_t max_dynamic_shared_bytes();  // 48 KiB, or more once cudaFuncSetAttribute raised it

// Work was queued (a launch, a copy, a GEMM, a collective): the next synchronize finds the device
// busy, and counts as a host wait (MLPD_EMULATE_HOST_WAITS, runtime_api.cpp).
void note_queued_work();

// Whether [p, p + bytes) lies inside one live cudaMalloc allocation.
bool is_device_range(const void* p, size_t bytes);

}  // namespace mlpd_emulate
