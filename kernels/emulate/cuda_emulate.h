// The CUDA emulator's device side (kernels/emulate/README.md): what a kernel of kernels/cuda sees
// when g++ compiles it (after convert.py) into code that runs on the CPU. Every thread of a block
// is a fiber; __syncthreads, __syncwarp and the warp collectives switch fibers, so a kernel's
// blocks run one after another, each block's threads in turn between its barriers. Shared memory
// is a static of the kernel (blocks never overlap); atomics are plain read-modify-writes (fibers
// never interrupt one another).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#undef __shared__
#define __shared__ static
#undef __launch_bounds__
#define __launch_bounds__(...)

namespace mlpd_emulate {

extern uint3 g_thread_idx, g_block_idx;
extern dim3 g_block_dim, g_grid_dim;

// One launch: every block of `grid`, each of `block` threads calling `thread_body(ctx)`. A bad
// configuration (as the GPU would refuse it) sets the error cudaGetLastError returns and runs
// nothing.
void run_grid(dim3 grid, dim3 block, size_t shared_bytes, void (*thread_body)(void*), void* ctx);

// A pointer argument of a kernel must point into device memory (one cudaMalloc allocation, or one
// past its end) or page-locked host memory, as a GPU can reach nothing else: else the launch aborts,
// naming the argument. Pointers inside struct arguments are not seen.
void check_kernel_pointer(const void* p, int argument);

template <class Args, class Kernel>
void launch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t /*stream: every launch is synchronous*/,
            Args args, Kernel kernel) {
  std::apply(
      [](const auto&... a) {
        int i = 0;
        (
            [&](const auto& v) {
              using T = std::decay_t<decltype(v)>;
              if constexpr (std::is_pointer_v<T> && !std::is_function_v<std::remove_pointer_t<T>>)
                if (v) check_kernel_pointer(static_cast<const void*>(v), i);
              ++i;
            }(a),
            ...);
      },
      args);
  struct Ctx {
    Args* args;
    Kernel* kernel;
  } ctx{&args, &kernel};
  run_grid(grid, block, shared_bytes,
           [](void* p) {
             Ctx* c = static_cast<Ctx*>(p);
             std::apply(*c->kernel, *c->args);
           },
           &ctx);
}

void* dynamic_shared();  // the launch's dynamic shared memory (its third configuration value)
void sync_block();       // __syncthreads
void sync_warp();        // __syncwarp
// The calling thread's lane and the value `bits` of lane `src` of its warp, after every live lane
// of the warp has offered its own (src < 0 or past the block: its own value back).
int lane();
uint64_t warp_exchange(uint64_t bits, int src);
unsigned warp_ballot(bool pred);

template <class T>
T shuffle_from(T v, int src) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffle of a value wider than 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = warp_exchange(bits, src);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

}  // namespace mlpd_emulate

#undef threadIdx
#undef blockIdx
#undef blockDim
#undef gridDim
#undef warpSize
#define threadIdx ::mlpd_emulate::g_thread_idx
#define blockIdx ::mlpd_emulate::g_block_idx
#define blockDim ::mlpd_emulate::g_block_dim
#define gridDim ::mlpd_emulate::g_grid_dim
#define warpSize 32

inline void __syncthreads() { ::mlpd_emulate::sync_block(); }
inline void __syncwarp(unsigned = 0xffffffffu) { ::mlpd_emulate::sync_warp(); }
inline void __threadfence() {}
inline void __threadfence_block() {}
inline unsigned __ballot_sync(unsigned, int pred) { return ::mlpd_emulate::warp_ballot(pred != 0); }
inline int __any_sync(unsigned, int pred) { return ::mlpd_emulate::warp_ballot(pred != 0) != 0; }

template <class T>
T __shfl_sync(unsigned, T v, int src, int width = 32) {
  const int l = ::mlpd_emulate::lane();
  return ::mlpd_emulate::shuffle_from(v, (l & ~(width - 1)) + (src & (width - 1)));
}
template <class T>
T __shfl_down_sync(unsigned, T v, unsigned delta, int width = 32) {
  const int l = ::mlpd_emulate::lane();
  return ::mlpd_emulate::shuffle_from(v, (l & (width - 1)) + int(delta) >= width ? l : l + int(delta));
}
template <class T>
T __shfl_up_sync(unsigned, T v, unsigned delta, int width = 32) {
  const int l = ::mlpd_emulate::lane();
  return ::mlpd_emulate::shuffle_from(v, (l & (width - 1)) < int(delta) ? l : l - int(delta));
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int mask, int width = 32) {
  const int l = ::mlpd_emulate::lane();
  const int src = l ^ mask;
  return ::mlpd_emulate::shuffle_from(v, src >= ((l / width) + 1) * width ? l : src);
}

// Atomics: one fiber runs at a time, so a plain read-modify-write is atomic.
namespace mlpd_emulate {
template <class T, class F>
T read_modify_write(T* p, F f) {
  const T old = *p;
  *p = f(old);
  return old;
}
}  // namespace mlpd_emulate
template <class T>
T atomicAdd(T* p, T v) { return mlpd_emulate::read_modify_write(p, [v](T o) { return T(o + v); }); }
template <class T>
T atomicSub(T* p, T v) { return mlpd_emulate::read_modify_write(p, [v](T o) { return T(o - v); }); }
template <class T>
T atomicMax(T* p, T v) { return mlpd_emulate::read_modify_write(p, [v](T o) { return o < v ? v : o; }); }
template <class T>
T atomicMin(T* p, T v) { return mlpd_emulate::read_modify_write(p, [v](T o) { return v < o ? v : o; }); }
template <class T>
T atomicExch(T* p, T v) { return mlpd_emulate::read_modify_write(p, [v](T) { return v; }); }
template <class T>
T atomicCAS(T* p, T compare, T v) { return mlpd_emulate::read_modify_write(p, [=](T o) { return o == compare ? v : o; }); }
template <class T>
T atomicOr(T* p, T v) { return mlpd_emulate::read_modify_write(p, [v](T o) { return T(o | v); }); }
template <class T>
T atomicAnd(T* p, T v) { return mlpd_emulate::read_modify_write(p, [v](T o) { return T(o & v); }); }

// The device's min and max overloads (the GPU's math library has them unqualified).
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a < b ? b : a; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a < b ? b : a; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a < b ? b : a; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a < b ? b : a; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a < b ? b : a; }
inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
inline unsigned long max(unsigned long a, unsigned long b) { return a < b ? b : a; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }

// Intrinsics, with the IEEE rounding their names promise (the file is built without contraction).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __powf(float a, float b) { return powf(a, b); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __double2float_rn(double x) { return static_cast<float>(x); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }
inline int __float2int_rn(float x) { return static_cast<int>(nearbyintf(x)); }
inline int __float2int_rz(float x) { return static_cast<int>(x); }
inline int __float2int_rd(float x) { return static_cast<int>(floorf(x)); }
// The reinterpreting casts: a bit copy (std::bit_cast needs C++20; the .cu files are C++17).
namespace mlpd_emulate {
template <class To, class From>
To bits_as(From v) {
  static_assert(sizeof(To) == sizeof(From));
  To out;
  std::memcpy(&out, &v, sizeof out);
  return out;
}
}  // namespace mlpd_emulate
inline unsigned __float_as_uint(float x) { return mlpd_emulate::bits_as<unsigned>(x); }
inline float __uint_as_float(unsigned u) { return mlpd_emulate::bits_as<float>(u); }
inline int __float_as_int(float x) { return mlpd_emulate::bits_as<int>(x); }
inline float __int_as_float(int u) { return mlpd_emulate::bits_as<float>(u); }
inline long long __double_as_longlong(double x) { return mlpd_emulate::bits_as<long long>(x); }
inline double __longlong_as_double(long long u) { return mlpd_emulate::bits_as<double>(u); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * b) >> 64);
}
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(unsigned(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
template <class T>
T __ldg(const T* p) {
  return *p;
}

// The runtime's templated form (nvcc's headers have it only for .cu files).
template <class T>
cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attr, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(entry), attr, value);
}
