// The two GPU convolution paths behind kernels/cuda/conv.cu's conv2d_* functions (which picks one,
// see there). Private to kernels/cuda/conv*.cu.
//   implicit GEMM (conv_implicit_gemm.cu): our own tiled kernel, any shape, always built.
//   cuDNN (conv_cudnn.cu): only where the build found cuDNN (MLPD_HAVE_CUDNN).
// Same layouts and accumulate rules as kernels/op_signatures.inc; scratch from the arena.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/ops.h"

namespace mlpd::cuda {

// ---- Implicit GEMM (conv_implicit_gemm.cu). Forward and backward data take no scratch;
// backward weights takes its split-K partial sums.
size_t implicit_conv_scratch_floats(const ConvDims& d);
void implicit_conv_forward(const ConvDims& d, const float* x, const float* w, float* y);
void implicit_conv_backward_data(const ConvDims& d, const float* dy, const float* w, float* dx, bool accumulate);
void implicit_conv_backward_weights(const ConvDims& d, const float* x, const float* dy, float* dw, Arena& arena);

#ifdef MLPD_HAVE_CUDNN
// ---- cuDNN (conv_cudnn.cu). Each pass returns false, having written nothing the caller sees,
// where cuDNN offers no deterministic fp32 algorithm whose workspace fits in what is left of the
// arena: the caller then runs the implicit GEMM.
size_t cudnn_conv_scratch_floats(const ConvDims& d);
bool cudnn_conv_forward(const ConvDims& d, const float* x, const float* w, float* y, Arena& arena);
bool cudnn_conv_backward_data(const ConvDims& d, const float* dy, const float* w, float* dx, Arena& arena,
                              bool accumulate);
bool cudnn_conv_backward_weights(const ConvDims& d, const float* x, const float* dy, float* dw, Arena& arena);
// bf16 operands on bf16 tensor cores (kernels/cuda/conv_bf16.h), with the same false.
size_t cudnn_conv_bf16_scratch_floats(const ConvDims& d);
bool cudnn_conv_forward_bf16(const ConvDims& d, const float* x, const uint16_t* x16, const float* w, float* y,
                             Arena& arena);
bool cudnn_conv_backward_data_bf16(const ConvDims& d, const float* dy, const uint16_t* dy16, const float* w,
                                   float* dx, Arena& arena);
#endif

}  // namespace mlpd::cuda
