// The op signatures shared by the CPU kernels (kernels/cpu/<op>.cpp) and, where written, the
// CUDA ones (kernels/cuda/<op>.cu, namespace mlpd::cuda). Kernels know nothing of layers,
// ranks or workloads: raw pointers in, raw pointers out, scratch from an Arena.
//
// Layouts (all row-major, fp32):
//   activations   NHWC  [n, h, w, c]                (c fastest)
//   conv weight   HWIO  [k, k, c_in, c_out]         (= a [k*k*c_in, c_out] GEMM operand)
//   linear weight       [in, out]                   (y = x * W + b)
//   batch norm          per-channel vectors [c]; an NHWC tensor is seen as [rows = n*h*w, c]
// Every parameter-gradient kernel ACCUMULATES into its gradient buffer (beta = 1): the trainer
// zeroes gradients once per step and may accumulate micro-batches. Input gradients (dx) are
// overwritten unless the function takes an `accumulate` flag and it is set.
// Setting FTZ/DAZ (core/fpu.h) is the caller's job, as is openblas_set_num_threads.
#pragma once
#include "kernels/optim.h"

#include <cstddef>
#include <cstdint>

#include "core/arena.h"

namespace mlpd {

// ---- GEMM: C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, row-major (cblas_sgemm). ----
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc);

// ---- 2-D convolution, square kernel, no bias (ResNet convs are followed by batch norm). ----
struct ConvDims {
  int n = 1, h = 1, w = 1, c_in = 1, c_out = 1;  // input [n, h, w, c_in]
  int k = 3, stride = 1, pad = 1;                // kernel k x k, zero padding `pad` on each side
  int out_h() const { return (h + 2 * pad - k) / stride + 1; }
  int out_w() const { return (w + 2 * pad - k) / stride + 1; }
};

// Floats of Arena scratch any of the three conv functions may take for these dims.
size_t conv2d_scratch_floats(const ConvDims& d);
// y [n, out_h, out_w, c_out] = conv(x, w). Overwrites y.
void conv2d_forward(const ConvDims& d, const float* x, const float* w, float* y, Arena& arena);
// dx [n, h, w, c_in] (+)= conv_transpose(dy, w); accumulate=false overwrites dx.
void conv2d_backward_data(const ConvDims& d, const float* dy, const float* w, float* dx,
                          Arena& arena, bool accumulate = false);
// dw [k, k, c_in, c_out] += correlation of x with dy.
void conv2d_backward_weights(const ConvDims& d, const float* x, const float* dy, float* dw,
                             Arena& arena);

// ---- Batch norm over an NHWC tensor seen as [rows, c], with optional fused epilogue:
//      y = [relu]( gamma * (x - mean) * invstd + beta [+ residual] ).
// Train: batch statistics (biased variance for normalising, unbiased for the running update);
//   running = momentum * running + (1 - momentum) * batch; saves mean and invstd for backward.
void batchnorm_forward_train(const float* x, int64_t rows, int c, const float* gamma,
                             const float* beta, float momentum, float eps, float* running_mean,
                             float* running_var, float* save_mean, float* save_invstd, float* y,
                             const float* residual /*nullable*/, bool relu);
// Eval: running statistics.
void batchnorm_forward_eval(const float* x, int64_t rows, int c, const float* gamma,
                            const float* beta, const float* running_mean, const float* running_var,
                            float eps, float* y, const float* residual /*nullable*/, bool relu);
// Backward of the train-mode forward. If relu_out is given (the forward's output y), dy is first
// masked by y > 0 (the fused ReLU). dx is overwritten (may not alias x; may alias dy);
// dgamma and dbeta accumulate. Scratch: 4*c floats (as doubles) from the arena.
void batchnorm_backward(const float* x, const float* dy, const float* relu_out /*nullable*/,
                        int64_t rows, int c, const float* gamma, const float* save_mean,
                        const float* save_invstd, float* dx, float* dgamma, float* dbeta,
                        Arena& arena);

// ---- Elementwise. ----
void relu_forward(const float* x, float* y, size_t n);                 // y may alias x
void relu_backward(const float* y, const float* dy, float* dx, size_t n);  // dx = dy*(y>0); may alias dy
void add_forward(const float* a, const float* b, float* y, size_t n);  // residual add; y may alias a or b
// The residual add's backward is the identity to both inputs: callers pass dy on to both.
void add_relu_forward(const float* a, const float* b, float* y, size_t n);  // y = relu(a + b)

// ---- Pooling (NHWC, square window, padding never wins a max and counts as zero in avg). ----
struct PoolDims {
  int n = 1, h = 1, w = 1, c = 1;
  int k = 2, stride = 2, pad = 0;
  int out_h() const { return (h + 2 * pad - k) / stride + 1; }
  int out_w() const { return (w + 2 * pad - k) / stride + 1; }
};
void maxpool_forward(const PoolDims& d, const float* x, float* y);
// Gradient goes to the FIRST maximal input in window scan order (kh, then kw), as PyTorch does;
// the argmax is recomputed from x. dx is overwritten.
void maxpool_backward(const PoolDims& d, const float* x, const float* dy, float* dx);
// Average over the k*k window including padding (PyTorch count_include_pad=True).
void avgpool_forward(const PoolDims& d, const float* x, float* y);
void avgpool_backward(const PoolDims& d, const float* dy, float* dx);  // dx overwritten
// Global average pool [n, hw, c] -> [n, c] and back (dx overwritten).
void global_avgpool_forward(const float* x, int n, int hw, int c, float* y);
void global_avgpool_backward(const float* dy, int n, int hw, int c, float* dx);

// ---- Fully connected: y [n, out] = x [n, in] * w [in, out] + b [out]. ----
void linear_forward(const float* x, int n, int in, int out, const float* w, const float* b,
                    float* y);
// dx (overwritten, nullable), dw and db (accumulated, db nullable).
void linear_backward(const float* x, const float* dy, int n, int in, int out, const float* w,
                     float* dx, float* dw, float* db);

// ---- Softmax cross-entropy with label smoothing, forward and backward fused. ----
// Target t = (1 - ls) * onehot(label) + ls / classes. Returns the SUM over the n samples of
// -sum_j t_j log softmax(logits)_j (in double). dlogits = (softmax - t) * grad_scale.
// correct (nullable) receives the count of samples whose argmax (first maximum) == label.
double softmax_xent(const float* logits, const int32_t* labels, int n, int classes,
                    float label_smoothing, float grad_scale, float* dlogits /*nullable*/,
                    int* correct /*nullable*/);

}  // namespace mlpd
