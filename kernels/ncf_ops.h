// Ops of the NeuMF model (ncf workload) that kernels/ops.h lacks, and the Adam update kernels.
// Same conventions as kernels/ops.h: raw pointers, row-major fp32, parameter gradients accumulate.
// (adam_update / lazy_adam_update belong with kernels/optim.h; they live here until that file's
// owner merges them.)
#pragma once
#include <cstddef>
#include <cstdint>

namespace mlpd {

// GMF layer: y[i, :] = a[i, :] * b[i, :] (elementwise), rows of `dim`; each operand has its own
// leading dimension. Overwrites y.
void gmf_forward(const float* a, int lda, const float* b, int ldb, int n, int dim, float* y, int ldy);
// da = dy * b, db = dy * a (overwritten; contiguous [n, dim]).
void gmf_backward(const float* a, int lda, const float* b, int ldb, const float* dy, int ldy, int n, int dim,
                  float* da, float* db);

// Sigmoid + binary cross-entropy on logits, fused and numerically stable:
//   loss_i = max(z,0) - y*z + log(1 + exp(-|z|)),  dlogits_i = (sigmoid(z) - y) * grad_scale.
// Returns the SUM of loss_i (double). labels are 0 or 1 (any value in [0,1] works). dlogits nullable.
double sigmoid_bce(const float* logits, const float* labels, int n, float grad_scale, float* dlogits);

// Adam (PyTorch's form, no weight decay), with t the 1-based step count:
//   m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2;
//   p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
// bias1 = 1-b1^t, bias2 = 1-b2^t are passed in so that every view of one step uses the same ones.
void adam_update(float* p, const float* g, float* m, float* v, size_t n, float lr, float b1, float b2, float eps,
                 float bias1, float bias2);
// LazyAdam: the same update applied only to elements whose gradient is non-zero; others keep p,
// m and v unchanged. Blocks of 16 all-zero gradients are skipped after one test, so untouched
// embedding rows cost a read of their gradient only.
void lazy_adam_update(float* p, const float* g, float* m, float* v, size_t n, float lr, float b1, float b2,
                      float eps, float bias1, float bias2);

}  // namespace mlpd
