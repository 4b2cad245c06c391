// The process's GPU: one per rank, chosen once, with one compute stream and the library handles
// every CUDA op uses. Plain C++17 (no CUDA types): host code reaches it through kernels/device.h.
// Every function throws std::runtime_error naming the failed call and its file:line.
#pragma once
#include <cstddef>
#include <string>

namespace mlpd::cuda {

// Number of usable GPUs; 0 when there is no driver or no device (any runtime error means none).
int device_count();
// Version of the cuDNN library linked in; 0 where built without it.
int cudnn_version();

// Makes GPU `ordinal` this process's device and creates its compute stream, cuBLAS handle (on
// that stream) and, where built with it, cuDNN handle. Returns a description for logs
// ("NVIDIA H200 (sm_90, 139.8 GiB)"). Calling it again with the same ordinal does nothing.
std::string open_device(int ordinal);
void close_device();   // frees the handles and the stream; safe when nothing is open
bool device_open();
void* compute_stream();  // the cudaStream_t every op is queued on
// Tensor-core math (TF32) for cuBLAS GEMMs and cuDNN convolutions, on only while a bf16 op runs
// (kernels/op_table_bf16.cpp): TF32 holds a bf16 operand exactly. Off (fp32 FMA math) otherwise,
// so fp32 results compare with the CPU's at fp32 tolerance.
void set_tensor_core_math(bool on);
bool tensor_core_math();

// Device memory, zeroed. Aborts nothing: throws on failure.
void* malloc_zeroed(size_t bytes);
void free_device(void* p);  // nullptr is fine; errors are ignored (used by destructors)
// Page-locked host memory, for input batches copied while compute runs.
void* malloc_pinned(size_t bytes);
void free_pinned(void* p);
// Copies queued on the compute stream; to_host waits for it (and for everything before it).
void copy_to_device_async(void* dst, const void* src, size_t bytes);
void copy_to_host(void* dst, const void* src, size_t bytes);
void copy_on_device_async(void* dst, const void* src, size_t bytes);
void zero_async(void* p, size_t bytes);
void synchronize();  // waits for the compute stream

}  // namespace mlpd::cuda
