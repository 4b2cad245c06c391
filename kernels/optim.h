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

// Sum of squares, accumulated in double for stability.
double sum_squares(const float* x, size_t n);

}  // namespace mlpd
