// bf16 convolutions on bf16 tensor cores (cuDNN), for the bf16 op table's forward and backward data
// (kernels/op_table_bf16.cpp). Plain C++17 (no CUDA types), so host code may include it.
// Each pass reads fp32 operands (rounded as it packs them) or, where given, an image operand's
// bf16 bits, accumulates in fp32 and writes its output rounded to bf16, widened to fp32: the
// table's values. It returns false, having written nothing the caller sees, where it does not run
// (a build without cuDNN, MLPD_CUDA_CONV=implicit, no deterministic bf16 algorithm for the shape
// whose workspace fits, or operands cuDNN finds misaligned): the table then rounds the operands
// and runs the fp32 pass with TF32 math. Backward weights always takes that path (its gradient
// stays fp32).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/ops.h"

namespace mlpd::cuda {

// Arena floats a pass of this path takes (0 where the path never runs).
size_t conv2d_bf16_tensor_core_scratch_floats(const ConvDims& d);
// x16 (dy16): the image operand's bf16 bits, or null to pack x (dy).
bool conv2d_forward_bf16_tensor_cores(const ConvDims& d, const float* x, const uint16_t* x16, const float* w, float* y,
                                      Arena& arena);
bool conv2d_backward_data_bf16_tensor_cores(const ConvDims& d, const float* dy, const uint16_t* dy16, const float* w,
                                            float* dx, Arena& arena);
// What a bf16 convolution runs on in this process, for logs and benchmarks.
const char* conv2d_bf16_path_name();

}  // namespace mlpd::cuda
