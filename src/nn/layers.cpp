#include "nn/layers.h"

namespace mlpd::nn {

Conv2d make_conv2d(ParamStore& s, const std::string& name, int h, int w, int c_in, int c_out, int k,
                   int stride, int pad, int max_batch) {
  Conv2d l;
  l.dims = ConvDims{max_batch, h, w, c_in, c_out, k, stride, pad};
  l.w = add_param(s, name + ".weight", size_t(k) * k * c_in * c_out, ParamKind::weight);
  return l;
}

void forward(const OpTable& o, const Conv2d& l, ParamStore& s, Arena& a, int n) {
  o.conv2d_forward(with_n(l.dims, n), l.x, param_ptr(s, l.w), l.y, a);
}

void backward(const OpTable& o, const Conv2d& l, ParamStore& s, Arena& a, int n, const float* dy, float* dx,
              bool accumulate_dx) {
  const ConvDims d = with_n(l.dims, n);
  o.conv2d_backward_weights(d, l.x, dy, grad_ptr(s, l.w), a);
  if (dx) o.conv2d_backward_data(d, dy, param_ptr(s, l.w), dx, a, accumulate_dx);
}

size_t scratch_floats(const OpTable& o, const Conv2d& l, int n) { return o.conv2d_scratch_floats(with_n(l.dims, n)); }

BatchNorm make_batchnorm(ParamStore& s, const std::string& name, int c, int64_t rows_per_image,
                         float momentum, float eps) {
  BatchNorm l;
  l.c = c;
  l.rows_per_image = rows_per_image;
  l.momentum = momentum;
  l.eps = eps;
  l.gamma = add_param(s, name + ".gamma", c, ParamKind::bias);
  l.beta = add_param(s, name + ".beta", c, ParamKind::bias);
  l.run_mean = add_state(s, name + ".running_mean", c);
  l.run_var = add_state(s, name + ".running_var", c);
  return l;
}

void forward(const OpTable& o, const BatchNorm& l, ParamStore& s, int n, bool train) {
  const int64_t rows = l.rows_per_image * n;
  if (train) {
    o.batchnorm_forward_train(l.x, rows, l.c, param_ptr(s, l.gamma), param_ptr(s, l.beta),
                            l.momentum, l.eps, state_ptr(s, l.run_mean), state_ptr(s, l.run_var),
                            l.save_mean, l.save_invstd, l.y, l.residual, l.relu);
  } else {
    o.batchnorm_forward_eval(l.x, rows, l.c, param_ptr(s, l.gamma), param_ptr(s, l.beta),
                           state_ptr(s, l.run_mean), state_ptr(s, l.run_var), l.eps, l.y,
                           l.residual, l.relu);
  }
}

void backward(const OpTable& o, const BatchNorm& l, ParamStore& s, Arena& a, int n, const float* dy, float* dx) {
  o.batchnorm_backward(l.x, dy, l.relu ? l.y : nullptr, l.rows_per_image * n, l.c,
                     param_ptr(s, l.gamma), l.save_mean, l.save_invstd, dx, grad_ptr(s, l.gamma),
                     grad_ptr(s, l.beta), a);
}

void forward(const OpTable& o, const ReLU& l, int n) { o.relu_forward(l.x, l.y, l.per_image * n); }
void backward(const OpTable& o, const ReLU& l, int n, const float* dy, float* dx) {
  o.relu_backward(l.y, dy, dx, l.per_image * n);
}

static PoolDims with_n(PoolDims d, int n) {
  d.n = n;
  return d;
}
void forward(const OpTable& o, const MaxPool& l, int n) { o.maxpool_forward(with_n(l.dims, n), l.x, l.y); }
void backward(const OpTable& o, const MaxPool& l, int n, const float* dy, float* dx) {
  o.maxpool_backward(with_n(l.dims, n), l.x, dy, dx);
}
void forward(const OpTable& o, const AvgPool& l, int n) { o.avgpool_forward(with_n(l.dims, n), l.x, l.y); }
void backward(const OpTable& o, const AvgPool& l, int n, const float* dy, float* dx) {
  o.avgpool_backward(with_n(l.dims, n), dy, dx);
}
void forward(const OpTable& o, const GlobalAvgPool& l, int n) { o.global_avgpool_forward(l.x, n, l.hw, l.c, l.y); }
void backward(const OpTable& o, const GlobalAvgPool& l, int n, const float* dy, float* dx) {
  o.global_avgpool_backward(dy, n, l.hw, l.c, dx);
}

Linear make_linear(ParamStore& s, const std::string& name, int in, int out) {
  Linear l;
  l.in = in;
  l.out = out;
  l.w = add_param(s, name + ".weight", size_t(in) * out, ParamKind::weight);
  l.b = add_param(s, name + ".bias", out, ParamKind::bias);
  return l;
}

void forward(const OpTable& o, const Linear& l, ParamStore& s, int n) {
  o.linear_forward(l.x, n, l.in, l.out, param_ptr(s, l.w), param_ptr(s, l.b), l.y);
}

void backward(const OpTable& o, const Linear& l, ParamStore& s, int n, const float* dy, float* dx) {
  o.linear_backward(l.x, dy, n, l.in, l.out, param_ptr(s, l.w), dx, grad_ptr(s, l.w),
                  grad_ptr(s, l.b));
}

}  // namespace mlpd::nn
