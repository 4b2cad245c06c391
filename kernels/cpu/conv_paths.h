// The two convolution algorithms behind kernels/ops.h's conv2d_* functions, exposed so that the
// tests and bench/bench_conv.cpp can run each one on every shape (the public functions pick one
// per shape with conv_use_direct()).
//   gemm:   im2col + OpenBLAS GEMM (conv.cpp): any shape, the general fallback.
//   direct: NHWC direct convolution with AVX-512 register tiles (conv_direct.cpp): no im2col,
//           no GEMM packing. Needs -mavx512f; without it direct_*_supported() is always false.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/ops.h"

namespace mlpd {

enum class ConvPass { forward, backward_data, backward_weights };

// ---- im2col + GEMM (conv.cpp). ----
size_t gemm_conv_scratch_floats(const ConvDims& d);
void gemm_conv_forward(const ConvDims& d, const float* x, const float* w, float* y, Arena& arena);
void gemm_conv_backward_data(const ConvDims& d, const float* dy, const float* w, float* dx,
                             Arena& arena, bool accumulate);
void gemm_conv_backward_weights(const ConvDims& d, const float* x, const float* dy, float* dw,
                                Arena& arena);

// ---- Direct NHWC convolution (conv_direct.cpp). ----
// Whether the direct kernel can run this pass at all (channel counts in multiples of 16 on the
// vectorised side, AVX-512 compiled in).
bool direct_conv_supported(const ConvDims& d, ConvPass pass);
size_t direct_conv_scratch_floats(const ConvDims& d);
void direct_conv_forward(const ConvDims& d, const float* x, const float* w, float* y, Arena& arena);
void direct_conv_backward_data(const ConvDims& d, const float* dy, const float* w, float* dx,
                               Arena& arena, bool accumulate);
void direct_conv_backward_weights(const ConvDims& d, const float* x, const float* dy, float* dw,
                                  Arena& arena);

// ---- Direct NHWC convolution on bf16 operands, fp32 sums (conv_direct_bf16.cpp). ----
// The CPU convolution of the bf16 op table (kernels/op_table_bf16.cpp) where
// conv_bf16_use_direct() picks it. Takes fp32 operands and rounds them to bf16 as it packs them.
// What a pass overwrites (y; dx unless accumulating) leaves it rounded to bf16; dw accumulates in
// fp32, as in the fp32 passes, and so does an accumulating dx. Needs avx512bf16 (-march=native
// on Zen 4, Cooper Lake, Sapphire Rapids and later); without it direct_conv_bf16_supported() is
// always false.
bool direct_conv_bf16_supported(const ConvDims& d, ConvPass pass);
// Whether this build has the kernel at all (avx512bf16 compiled in).
bool direct_conv_bf16_available();
size_t direct_conv_bf16_scratch_floats(const ConvDims& d);
void direct_conv_bf16_forward(const ConvDims& d, const float* x, const float* w, float* y, Arena& arena);
void direct_conv_bf16_backward_data(const ConvDims& d, const float* dy, const float* w, float* dx,
                                    Arena& arena, bool accumulate);
void direct_conv_bf16_backward_weights(const ConvDims& d, const float* x, const float* dy, float* dw,
                                       Arena& arena);
// The same passes with an activation operand given as bf16 bits (one a layer keeps as bf16),
// packed as they are: the bits of the fp32 passes on that operand widened, with no fp32 copy.
void direct_conv_bf16_forward(const ConvDims& d, const uint16_t* x, const float* w, float* y, Arena& arena);
void direct_conv_bf16_backward_data(const ConvDims& d, const uint16_t* dy, const float* w, float* dx,
                                    Arena& arena, bool accumulate);
void direct_conv_bf16_backward_weights(const ConvDims& d, const uint16_t* x, const float* dy, float* dw,
                                       Arena& arena);
void direct_conv_bf16_backward_weights(const ConvDims& d, const float* x, const uint16_t* dy, float* dw,
                                       Arena& arena);

// The per-shape rule the public conv2d_* functions follow (measured with bench_conv).
bool conv_use_direct(const ConvDims& d, ConvPass pass);
// Benchmark switch: with false, conv_use_direct() always answers false (the im2col+GEMM
// baseline), so bench_conv can time the whole model both ways in one process. Default true.
void conv_set_direct_enabled(bool enabled);

// The bf16 table's rule: whether a bf16 convolution pass runs on the bf16 direct kernel (else
// on the fp32 convolution of operands rounded to bf16). Measured with bench_conv_bf16.
bool conv_bf16_use_direct(const ConvDims& d, ConvPass pass);
// Benchmark and test switch: with false, conv_bf16_use_direct() always answers false. Default true.
void conv_bf16_set_direct_enabled(bool enabled);

}  // namespace mlpd
