// The CUDA ops: the same declarations as the CPU ones (kernels/op_signatures.inc), in
// namespace mlpd::cuda. Plain C++17 (no CUDA types), so host code may include it; the definitions
// are in kernels/cuda/<op>.cu, built only where nvcc was found (MLPD_HAVE_CUDA).
#pragma once
#include "kernels/ops.h"

namespace mlpd::cuda {

#include "kernels/op_signatures.inc"  // IWYU pragma: export

}  // namespace mlpd::cuda
