// The two paths behind the CPU gemm_bf16 (kernels/op_signatures.inc), exposed so that the tests and
// bench/bench_gemm_bf16.cpp can run each one:
//   native: our AVX512-BF16 kernel (vdpbf16ps: two bf16 products summed into an fp32 lane per
//           instruction), built where the compiler targets avx512bf16 (-march=native on Zen 4,
//           Cooper Lake, Sapphire Rapids and later).
//   widen:  the operands widened to fp32 and OpenBLAS sgemm. The same products (a bf16 product
//           is exact in fp32), summed in OpenBLAS's order: every other machine's path.
#pragma once

namespace mlpd {

// Whether this build has the native kernel.
bool gemm_bf16_native_available();
// Benchmark and test switch: with false, gemm_bf16 always widens. Default true.
void gemm_bf16_set_native_enabled(bool enabled);
// "avx512bf16" or "widen+openblas": the path gemm_bf16 takes now.
const char* gemm_bf16_path_name();

}  // namespace mlpd
