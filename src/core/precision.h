// The compute precision of a run (--precision). fp32: every op in fp32. bf16: every GEMM and
// convolution takes bf16 operands (activations and weights rounded to nearest even) and accumulates
// in fp32; the activations and activation gradients they write are rounded to bf16. Everything
// else (normalization, losses, attention, the optimizer over fp32 master weights and state, the
// accumulated weight gradients) stays fp32, as PyTorch's autocast does (kernels/op_table.h).
// Storage: the CNN units and the transformer keep what they save as bf16 where no bit changes
// (src/nn/conv_bn.h, src/workloads/transformer/transformer_model.cpp).
#pragma once
#include <cstdint>
#include <string>

namespace mlpd {

enum class Precision : uint8_t { fp32, bf16 };

Precision parse_compute_precision(const std::string& s);  // "fp32" | "bf16"; UserError otherwise
const char* compute_precision_name(Precision p);

}  // namespace mlpd
