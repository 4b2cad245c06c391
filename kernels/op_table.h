// The ops of one device as a table of function pointers, so that layers and models are written
// once and run on the CPU or the GPU: `ops.conv2d_forward(...)`. Each field's type is the CPU
// function's, and the CUDA table is filled from namespace mlpd::cuda, so the two can only agree.
#pragma once
#include "core/precision.h"
#include "core/tensor.h"
#include "kernels/ops.h"

namespace mlpd {

// The translation, detection and minigo ops, each list filled in as its ops get both kernels.
#include "kernels/op_list_transformer.inc"
#include "kernels/op_list_gnmt.inc"
#include "kernels/op_list_detection.inc"
#include "kernels/op_list_minigo.inc"

// Every op of kernels/op_signatures.inc, once.
#define MLPD_FOR_EACH_OP(X)                                                                              \
  X(gemm) X(conv2d_scratch_floats) X(conv2d_forward) X(conv2d_backward_data) X(conv2d_backward_weights)  \
  X(batchnorm_forward_train) X(batchnorm_forward_eval) X(batchnorm_backward) X(relu_forward)            \
  X(relu_backward) X(add_forward) X(add_relu_forward) X(copy_rows) X(bf16_round) X(bf16_round_rows)                                  \
  X(bf16_pack_rows) X(bf16_unpack_rows) X(relu_backward_bf16) X(gemm_bf16) X(maxpool_forward) X(maxpool_backward)                                 \
  X(avgpool_forward) X(avgpool_backward) X(global_avgpool_forward) X(global_avgpool_backward)           \
  X(linear_forward) X(linear_backward) X(bias_grad) X(softmax_xent) X(sgd_momentum_update) X(lars_update)             \
  X(adam_update) X(lazy_adam_update) X(sum_squares) X(embedding_gather) X(embedding_scatter_add)         \
  X(gmf_forward) X(gmf_backward) X(sigmoid_bce) X(scale_inplace) X(clip_by_global_norm)                 \
  MLPD_TRANSFORMER_OPS(X) MLPD_GNMT_OPS(X) MLPD_DETECTION_OPS(X) MLPD_MINIGO_OPS(X)

struct OpTable {
  Device device = Device::cpu;
  Precision precision = Precision::fp32;
#define MLPD_OP_FIELD(name) decltype(&::mlpd::name) name = nullptr;
  MLPD_FOR_EACH_OP(MLPD_OP_FIELD)
#undef MLPD_OP_FIELD
};

const OpTable& cpu_ops();
// Throws UserError where this build has no CUDA.
const OpTable& cuda_ops();
const OpTable& ops_for(Device d);
// The table of a run's --precision: fp32 is ops_for(d); bf16 wraps its GEMM and convolution ops
// (kernels/op_table_bf16.cpp, core/precision.h).
const OpTable& ops_for(Device d, Precision p);
// The bf16 table's linear_backward whose input is already bf16 bits (x16: n rows of `in`), so no
// fp32 copy of it is made and packed again (a layer that keeps its input as bf16, nn/bf16_storage.h).
void linear_backward_bf16_input(Device d, const uint16_t* x16, const float* dy, int n, int in, int out, const float* w,
                                float* dx, float* dw, float* db);
// The bf16 table's convolution passes with one activation operand given as bf16 bits, as a layer
// keeps it: where the CPU's bf16 kernel runs the pass it packs the bits as they are, with no fp32
// copy; elsewhere they are widened into the arena for the table's pass. The bits of the table's
// pass on the widened operand either way.
void conv2d_forward_bf16_input(Device dev, const ConvDims& d, const uint16_t* x16, const float* w, float* y,
                               Arena& arena);
void conv2d_backward_data_bf16_input(Device dev, const ConvDims& d, const uint16_t* dy16, const float* w, float* dx,
                                     Arena& arena, bool accumulate);
void conv2d_backward_weights_bf16_input(Device dev, const ConvDims& d, const uint16_t* x16, const float* dy,
                                        float* dw, Arena& arena);
void conv2d_backward_weights_bf16_input(Device dev, const ConvDims& d, const float* x, const uint16_t* dy16,
                                        float* dw, Arena& arena);
// Which operand a layer keeps as bf16: the image (x of forward and backward_weights), or a
// transposed convolution's input (dy of backward_data and backward_weights).
enum class Bf16Operand { image, output_gradient };
// Arena floats of those two passes: the table's, and the widened operand where a pass widens it.
size_t conv2d_scratch_floats_bf16_input(Device dev, const ConvDims& d, Bf16Operand kept);
// rows x width bf16 values (dense) widened into rows x width floats of Arena scratch (the caller's
// scope), for an fp32 op that reads a value kept as bf16.
float* bf16_widened_rows(const OpTable& o, Arena& a, const uint16_t* x16, int rows, size_t width);
// Which kernel runs the bf16 table's GEMMs on this device: "cublas", or on the CPU "avx512bf16" or
// "widen+openblas" (kernels/cpu/gemm_bf16.h). Their sums run in different orders, so a bf16
// result is reproduced bit for bit only on the same one: the run summary records it.
const char* bf16_gemm_kernel(Device d);
// What the bf16 table's convolutions run on this device (kernels/cuda/conv_bf16.h on CUDA), for
// benchmarks and logs.
const char* bf16_conv_kernel(Device d);

}  // namespace mlpd
