// The naive convolution in double that the convolution tests compare every kernel with: y, and
// for dL/dy = dy the gradients dx and dw, each with the sum of the absolute values of its terms
// (the scale of the rounding error a float summation may make).
#pragma once
#include <cmath>
#include <vector>

#include "kernels/ops.h"

namespace mlpd::test {

inline size_t conv_out_size(const ConvDims& d) { return size_t(d.n) * d.out_h() * d.out_w() * d.c_out; }
inline size_t conv_in_size(const ConvDims& d) { return size_t(d.n) * d.h * d.w * d.c_in; }
inline size_t conv_w_size(const ConvDims& d) { return size_t(d.k) * d.k * d.c_in * d.c_out; }

struct ConvReference {
  std::vector<double> y, dx, dw;
  std::vector<double> y_abs, dx_abs, dw_abs;
};

// dy may be empty: then only y.
inline ConvReference conv_reference(const ConvDims& d, const std::vector<float>& x, const std::vector<float>& w,
                                    const std::vector<float>& dy) {
  ConvReference r;
  r.y.assign(conv_out_size(d), 0.0), r.y_abs = r.y;
  const bool grads = !dy.empty();
  if (grads) {
    r.dx.assign(conv_in_size(d), 0.0), r.dx_abs = r.dx;
    r.dw.assign(conv_w_size(d), 0.0), r.dw_abs = r.dw;
  }
  const int oh_n = d.out_h(), ow_n = d.out_w();
  for (int n = 0; n < d.n; ++n)
    for (int oh = 0; oh < oh_n; ++oh)
      for (int ow = 0; ow < ow_n; ++ow)
        for (int kh = 0; kh < d.k; ++kh)
          for (int kw = 0; kw < d.k; ++kw) {
            const int ih = oh * d.stride - d.pad + kh, iw = ow * d.stride - d.pad + kw;
            if (ih < 0 || ih >= d.h || iw < 0 || iw >= d.w) continue;
            for (int ci = 0; ci < d.c_in; ++ci)
              for (int co = 0; co < d.c_out; ++co) {
                const size_t xi = ((size_t(n) * d.h + ih) * d.w + iw) * d.c_in + ci;
                const size_t wi = ((size_t(kh) * d.k + kw) * d.c_in + ci) * d.c_out + co;
                const size_t yi = ((size_t(n) * oh_n + oh) * ow_n + ow) * d.c_out + co;
                const double xw = double(x[xi]) * double(w[wi]);
                r.y[yi] += xw, r.y_abs[yi] += std::fabs(xw);
                if (!grads) continue;
                const double gw = double(dy[yi]) * double(w[wi]), gx = double(dy[yi]) * double(x[xi]);
                r.dx[xi] += gw, r.dx_abs[xi] += std::fabs(gw);
                r.dw[wi] += gx, r.dw_abs[wi] += std::fabs(gx);
              }
          }
  return r;
}

}  // namespace mlpd::test
