// Max, average and global average pooling over NHWC; channels are the contiguous inner loop.
#include <algorithm>
#include <cstring>
#include <limits>

#include "kernels/ops.h"

namespace mlpd {

namespace {

// The one window walk of every pooling kernel: for output pixel (n, oh, ow), calls tap(offset)
// with the float offset (at channel 0) of each in-bounds input pixel, in scan order (kh, then kw).
template <typename Tap>
inline void for_each_window_tap(const PoolDims& d, int n, int oh, int ow, Tap&& tap) {
  for (int kh = 0; kh < d.k; ++kh) {
    const int ih = oh * d.stride - d.pad + kh;
    if (ih < 0 || ih >= d.h) continue;
    for (int kw = 0; kw < d.k; ++kw) {
      const int iw = ow * d.stride - d.pad + kw;
      if (iw < 0 || iw >= d.w) continue;
      tap(((size_t(n) * d.h + ih) * d.w + iw) * d.c);
    }
  }
}

}  // namespace

void maxpool_forward(const PoolDims& d, const float* x, float* y) {
  const int oh_n = d.out_h(), ow_n = d.out_w(), c = d.c;
  for (int n = 0; n < d.n; ++n)
    for (int oh = 0; oh < oh_n; ++oh)
      for (int ow = 0; ow < ow_n; ++ow) {
        float* yo = y + ((size_t(n) * oh_n + oh) * ow_n + ow) * c;
        std::fill(yo, yo + c, -std::numeric_limits<float>::infinity());
        for_each_window_tap(d, n, oh, ow, [&](size_t in) {
          for (int j = 0; j < c; ++j) yo[j] = std::max(yo[j], x[in + j]);
        });
      }
}

void maxpool_backward(const PoolDims& d, const float* x, const float* dy, float* dx) {
  const int oh_n = d.out_h(), ow_n = d.out_w(), c = d.c;
  std::memset(dx, 0, sizeof(float) * size_t(d.n) * d.h * d.w * c);
  for (int n = 0; n < d.n; ++n)
    for (int oh = 0; oh < oh_n; ++oh)
      for (int ow = 0; ow < ow_n; ++ow) {
        const float* go = dy + ((size_t(n) * oh_n + oh) * ow_n + ow) * c;
        for (int j = 0; j < c; ++j) {
          float best = -std::numeric_limits<float>::infinity();
          size_t arg = SIZE_MAX;
          for_each_window_tap(d, n, oh, ow, [&](size_t in) {
            const size_t idx = in + j;
            if (arg == SIZE_MAX || x[idx] > best) {  // strict: the first maximum wins ties
              best = x[idx];
              arg = idx;
            }
          });
          if (arg != SIZE_MAX) dx[arg] += go[j];
        }
      }
}

void avgpool_forward(const PoolDims& d, const float* x, float* y) {
  const int oh_n = d.out_h(), ow_n = d.out_w(), c = d.c;
  const float inv = 1.0f / float(d.k * d.k);
  for (int n = 0; n < d.n; ++n)
    for (int oh = 0; oh < oh_n; ++oh)
      for (int ow = 0; ow < ow_n; ++ow) {
        float* yo = y + ((size_t(n) * oh_n + oh) * ow_n + ow) * c;
        std::fill(yo, yo + c, 0.0f);
        for_each_window_tap(d, n, oh, ow, [&](size_t in) {
          for (int j = 0; j < c; ++j) yo[j] += x[in + j];
        });
        for (int j = 0; j < c; ++j) yo[j] *= inv;
      }
}

void avgpool_backward(const PoolDims& d, const float* dy, float* dx) {
  const int oh_n = d.out_h(), ow_n = d.out_w(), c = d.c;
  const float inv = 1.0f / float(d.k * d.k);
  std::memset(dx, 0, sizeof(float) * size_t(d.n) * d.h * d.w * c);
  for (int n = 0; n < d.n; ++n)
    for (int oh = 0; oh < oh_n; ++oh)
      for (int ow = 0; ow < ow_n; ++ow) {
        const float* go = dy + ((size_t(n) * oh_n + oh) * ow_n + ow) * c;
        for_each_window_tap(d, n, oh, ow, [&](size_t in) {
          for (int j = 0; j < c; ++j) dx[in + j] += go[j] * inv;
        });
      }
}

void global_avgpool_forward(const float* x, int n, int hw, int c, float* y) {
  const float inv = 1.0f / float(hw);
  for (int i = 0; i < n; ++i) {
    float* yo = y + size_t(i) * c;
    std::fill(yo, yo + c, 0.0f);
    const float* xi = x + size_t(i) * hw * c;
    for (int p = 0; p < hw; ++p)
      for (int j = 0; j < c; ++j) yo[j] += xi[size_t(p) * c + j];
    for (int j = 0; j < c; ++j) yo[j] *= inv;
  }
}

void global_avgpool_backward(const float* dy, int n, int hw, int c, float* dx) {
  const float inv = 1.0f / float(hw);
  for (int i = 0; i < n; ++i) {
    const float* go = dy + size_t(i) * c;
    float* xi = dx + size_t(i) * hw * c;
    for (int p = 0; p < hw; ++p)
      for (int j = 0; j < c; ++j) xi[size_t(p) * c + j] = go[j] * inv;
  }
}

}  // namespace mlpd
