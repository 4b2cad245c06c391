// Ops of the NeuMF model (ncf workload) that kernels/ops.h lacks.
// Same conventions as kernels/ops.h: raw pointers, row-major fp32, parameter gradients accumulate.
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

}  // namespace mlpd
