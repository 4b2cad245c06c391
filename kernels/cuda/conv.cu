// The GPU's conv2d_* functions: they choose, per call, between two paths (kernels/cuda/conv_paths.cuh).
//   cuDNN (conv_cudnn.cu): the default where the build found cuDNN; the fastest we have.
//   implicit GEMM (conv_implicit_gemm.cu), our own kernel, runs
//     - everywhere where the build has no cuDNN;
//     - for a pass where cuDNN offers no deterministic fp32 algorithm whose workspace fits in the
//       arena (so a shape cuDNN cannot do still trains);
//     - everywhere when the environment has MLPD_CUDA_CONV=implicit (read once per process), so
//       that tests on a GPU can hold each path against the CPU and against each other.
//   MLPD_CUDA_CONV=cudnn asks for cuDNN explicitly and is an error in a build without it; any
//   other value is an error too, rather than silently testing the wrong path.
// Scratch: the larger need of the two paths (cuDNN: KRSC weights + workspace; implicit GEMM: the
// split-K partials of backward weights), so that the fallback always fits.
#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/conv_bf16.h"
#include "kernels/cuda/conv_paths.cuh"
#include "kernels/cuda/ops.h"

namespace mlpd::cuda {

namespace {

enum class ConvPath { cudnn, implicit_gemm };

ConvPath configured_path() {
  static const ConvPath path = [] {
    const char* env = std::getenv("MLPD_CUDA_CONV");
    const std::string v = env ? env : "";
    if (v == "implicit") return ConvPath::implicit_gemm;
#ifdef MLPD_HAVE_CUDNN
    if (v.empty() || v == "cudnn") return ConvPath::cudnn;
#else
    if (v.empty()) return ConvPath::implicit_gemm;
    if (v == "cudnn") throw std::runtime_error("MLPD_CUDA_CONV=cudnn, but this build has no cuDNN");
#endif
    throw std::runtime_error("MLPD_CUDA_CONV=" + v + ": expected 'cudnn' or 'implicit'");
  }();
  return path;
}

// Whether the convolution has any output at all (a zero batch, or a kernel larger than the padded
// input, has none).
bool has_output(const ConvDims& d) {
  return d.n > 0 && d.h > 0 && d.w > 0 && d.c_in > 0 && d.c_out > 0 && d.k > 0 && d.stride > 0 && d.out_h() > 0 &&
         d.out_w() > 0;
}

}  // namespace

size_t conv2d_scratch_floats(const ConvDims& d) {
  if (!has_output(d)) return 0;
  size_t need = implicit_conv_scratch_floats(d);
#ifdef MLPD_HAVE_CUDNN
  if (configured_path() == ConvPath::cudnn) need = std::max(need, cudnn_conv_scratch_floats(d));
#endif
  return need;
}

void conv2d_forward(const ConvDims& d, const float* x, const float* w, float* y, Arena& arena) {
  if (!has_output(d)) return;
#ifdef MLPD_HAVE_CUDNN
  if (configured_path() == ConvPath::cudnn && cudnn_conv_forward(d, x, w, y, arena)) return;
#else
  (void)arena;
  configured_path();  // reports a bad MLPD_CUDA_CONV
#endif
  implicit_conv_forward(d, x, w, y);
}

void conv2d_backward_data(const ConvDims& d, const float* dy, const float* w, float* dx, Arena& arena,
                          bool accumulate) {
  if (!has_output(d)) {  // dx gets nothing from dy
    if (!accumulate && d.n > 0 && d.h > 0 && d.w > 0 && d.c_in > 0)
      CUDA_CHECK(cudaMemsetAsync(dx, 0, sizeof(float) * size_t(d.n) * d.h * d.w * d.c_in, stream()));
    return;
  }
#ifdef MLPD_HAVE_CUDNN
  if (configured_path() == ConvPath::cudnn && cudnn_conv_backward_data(d, dy, w, dx, arena, accumulate)) return;
#else
  (void)arena;
  configured_path();
#endif
  implicit_conv_backward_data(d, dy, w, dx, accumulate);
}

void conv2d_backward_weights(const ConvDims& d, const float* x, const float* dy, float* dw, Arena& arena) {
  if (!has_output(d)) return;
#ifdef MLPD_HAVE_CUDNN
  if (configured_path() == ConvPath::cudnn && cudnn_conv_backward_weights(d, x, dy, dw, arena)) return;
#else
  configured_path();
#endif
  implicit_conv_backward_weights(d, x, dy, dw, arena);
}

size_t conv2d_bf16_tensor_core_scratch_floats(const ConvDims& d) {
#ifdef MLPD_HAVE_CUDNN
  if (has_output(d) && configured_path() == ConvPath::cudnn) return cudnn_conv_bf16_scratch_floats(d);
#else
  (void)d;
#endif
  return 0;
}

bool conv2d_forward_bf16_tensor_cores(const ConvDims& d, const float* x, const uint16_t* x16, const float* w, float* y,
                                      Arena& arena) {
#ifdef MLPD_HAVE_CUDNN
  if (has_output(d) && configured_path() == ConvPath::cudnn) return cudnn_conv_forward_bf16(d, x, x16, w, y, arena);
#else
  (void)d, (void)x, (void)x16, (void)w, (void)y, (void)arena;
#endif
  return false;
}

bool conv2d_backward_data_bf16_tensor_cores(const ConvDims& d, const float* dy, const uint16_t* dy16, const float* w,
                                            float* dx, Arena& arena) {
#ifdef MLPD_HAVE_CUDNN
  if (has_output(d) && configured_path() == ConvPath::cudnn)
    return cudnn_conv_backward_data_bf16(d, dy, dy16, w, dx, arena);
#else
  (void)d, (void)dy, (void)dy16, (void)w, (void)dx, (void)arena;
#endif
  return false;
}

const char* conv2d_bf16_path_name() {
  return configured_path() == ConvPath::cudnn
             ? "cudnn bf16 tensor cores (backward weights: TF32 on rounded operands)"
             : "implicit-gemm on rounded operands";
}

}  // namespace mlpd::cuda
