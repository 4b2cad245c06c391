// Optimizer update kernels: one pass over a contiguous range of the flat buffers.
#pragma once
#include <cstddef>

namespace mlpd {

// SGD with momentum, weight decay folded into the gradient (PyTorch/MLPerf reference form):
//   g' = g + wd*p;  m = momentum*m + g';  p -= lr*m
void sgd_momentum_update(float* p, const float* g, float* m, size_t n, float lr, float momentum,
                         float weight_decay);

// LARS (MLPerf ResNet form): trust = eta*||p|| / (||g|| + wd*||p|| + eps) for weights, 1 for
// skipped (bias/BN) views; m = momentum*m + lr*trust*(g + wd*p); p -= m.
// Returns the trust ratio it applied.
float lars_update(float* p, const float* g, float* m, size_t n, float lr, float momentum,
                  float weight_decay, float eta, float epsilon, bool skip_trust_and_decay);

// Sum of squares, accumulated in double for stability.
double sum_squares(const float* x, size_t n);

}  // namespace mlpd
