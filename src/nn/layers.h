// Layers: plain structs holding dims, view indices into the ParamStore and pointers to the
// activation buffers they read and write (owned by the model, sized for its max batch), plus free
// functions `forward` and `backward` per layer type, which run on the device of the OpTable they
// are given (kernels/op_table.h): the pointers and the Arena are that device's. Layers never
// allocate: per-call scratch comes from the Arena. Parameter gradients ACCUMULATE into the
// store's gradients.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/arena.h"
#include "core/param_store.h"
#include "kernels/op_table.h"

namespace mlpd::nn {

// Conv without bias; weight view HWIO [k, k, c_in, c_out], ParamKind::weight.
struct Conv2d {
  ConvDims dims;             // dims.n is the max batch; calls pass the actual n
  size_t w = 0;              // param view
  const float* x = nullptr;  // input  [n, h, w, c_in]   (kept for backward)
  float* y = nullptr;        // output [n, oh, ow, c_out]
};
// A layer's dims (built for the max batch) at a call's n.
inline ConvDims with_n(ConvDims d, int n) {
  d.n = n;
  return d;
}
Conv2d make_conv2d(ParamStore& s, const std::string& name, int h, int w, int c_in, int c_out, int k,
                   int stride, int pad, int max_batch);
void forward(const OpTable& o, const Conv2d& l, ParamStore& s, Arena& a, int n);
// dx nullable (skip the data gradient, e.g. the stem); accumulate adds into dx.
void backward(const OpTable& o, const Conv2d& l, ParamStore& s, Arena& a, int n, const float* dy, float* dx,
              bool accumulate_dx = false);
size_t scratch_floats(const OpTable& o, const Conv2d& l, int n);

// Batch norm with optional fused residual add and ReLU: y = relu?(bn(x) + residual?).
struct BatchNorm {
  int c = 0;
  int64_t rows_per_image = 0;       // h*w
  size_t gamma = 0, beta = 0;       // param views (ParamKind::bias)
  size_t run_mean = 0, run_var = 0; // state views
  float momentum = 0.9f, eps = 1e-5f;
  const float* x = nullptr;         // kept for backward
  float* y = nullptr;
  const float* residual = nullptr;  // nullable
  bool relu = false;
  float* save_mean = nullptr;       // [c], model-owned
  float* save_invstd = nullptr;     // [c]
};
BatchNorm make_batchnorm(ParamStore& s, const std::string& name, int c, int64_t rows_per_image,
                         float momentum, float eps);
void forward(const OpTable& o, const BatchNorm& l, ParamStore& s, int n, bool train);
// dy is the gradient w.r.t. y; with relu the mask y>0 is applied here. dx overwritten. The
// residual's gradient is dy masked by the ReLU: the caller computes it (relu_backward) if needed.
void backward(const OpTable& o, const BatchNorm& l, ParamStore& s, Arena& a, int n, const float* dy, float* dx);

struct ReLU {
  size_t per_image = 0;
  const float* x = nullptr;
  float* y = nullptr;
};
void forward(const OpTable& o, const ReLU& l, int n);
void backward(const OpTable& o, const ReLU& l, int n, const float* dy, float* dx);

struct MaxPool {
  PoolDims dims;
  const float* x = nullptr;
  float* y = nullptr;
};
void forward(const OpTable& o, const MaxPool& l, int n);
void backward(const OpTable& o, const MaxPool& l, int n, const float* dy, float* dx);

struct AvgPool {
  PoolDims dims;
  const float* x = nullptr;
  float* y = nullptr;
};
void forward(const OpTable& o, const AvgPool& l, int n);
void backward(const OpTable& o, const AvgPool& l, int n, const float* dy, float* dx);

struct GlobalAvgPool {
  int hw = 0, c = 0;
  const float* x = nullptr;
  float* y = nullptr;
};
void forward(const OpTable& o, const GlobalAvgPool& l, int n);
void backward(const OpTable& o, const GlobalAvgPool& l, int n, const float* dy, float* dx);

// Fully connected; weight view [in, out] (ParamKind::weight), bias view [out] (ParamKind::bias).
struct Linear {
  int in = 0, out = 0;
  size_t w = 0, b = 0;
  const float* x = nullptr;
  float* y = nullptr;
};
Linear make_linear(ParamStore& s, const std::string& name, int in, int out);
void forward(const OpTable& o, const Linear& l, ParamStore& s, int n);
void backward(const OpTable& o, const Linear& l, ParamStore& s, int n, const float* dy, float* dx /*nullable*/);

}  // namespace mlpd::nn
