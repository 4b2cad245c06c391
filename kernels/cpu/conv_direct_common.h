// What the two direct NHWC convolutions share (conv_direct.cpp on fp32 operands,
// conv_direct_bf16.cpp on bf16 operands): loop bounds, register-tile sizes and backward data's
// parity classes. Both run the same loops; only their reduction step differs.
#pragma once
#include <algorithm>
#include <cstddef>

#include "kernels/cpu/conv_paths.h"
#include "kernels/ops.h"

namespace mlpd::direct_conv {

inline int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
inline int ceil_div(int a, int b) { return -floor_div(-a, b); }

constexpr int kMaxTaps = 64;  // k <= 8 for the direct paths

// The shapes the register tiles take (either kernel, where it is compiled): at most kMaxTaps taps,
// and the channels a pass vectorises over (its output's) in multiples of 16.
inline bool tiles_fit(const ConvDims& d, ConvPass pass) {
  if (d.k < 1 || d.k * d.k > kMaxTaps || d.stride < 1 || d.pad < 0) return false;
  switch (pass) {
    case ConvPass::forward: return d.c_out % 16 == 0;
    case ConvPass::backward_data: return d.c_in % 16 == 0;
    case ConvPass::backward_weights: return d.c_out % 16 == 0;
  }
  return false;
}

// Zero border of the padded dy image in backward data: k on each side covers every tap of every
// parity class (see the bounds in the comment of parity_class).
inline int dy_border(const ConvDims& d) { return d.k; }

// Register budget: R*V accumulators + V weight vectors <= 32 zmm. (V = 4, 16 output channels x 4
// per pixel, measured no faster for forward / backward data at 7x7x64 and ~20% slower for
// backward weights, so tiles are at most 32 channels wide.)
constexpr int kRmax1 = 28, kRmax2 = 14;
constexpr int rmax(int v) { return v == 1 ? kRmax1 : kRmax2; }

// Vectors of 16 channels per register tile for `c` output channels of a tile pass: the widest
// of {2, 1} that divides c.
inline int pick_v(int c) { return c % 32 == 0 ? 2 : 1; }

// Calls fn over one row of `len` output pixels in tiles of at most rmax(v), as even as possible.
template <class F>
void for_row_tiles(int len, int v, F&& f) {
  const int rm = rmax(v);
  const int ntiles = (len + rm - 1) / rm;
  const int r = (len + ntiles - 1) / ntiles;
  for (int b0 = 0; b0 < len; b0 += r) f(b0, std::min(r, len - b0));
}

// Backward data computes dx as the transposed convolution of dy, one parity class of dx pixels
// (ih % s == ph, iw % s == pw) at a time: each class is a stride-1 correlation of a zero-bordered
// dy with the taps that reach it.
// dx[n, ih, iw, ci] = sum over (kh, kw, co) with ih = oh*s - p + kh, iw = ow*s - p + kw of
// dy[n, oh, ow, co] * W[kh, kw, ci, co]. For ih = s*a + ph, tap kh contributes iff
// (ph + p - kh) is a multiple of s, from dy row oh = a + (ph + p - kh)/s. Over all ih in [0, h)
// and kh in [0, k) that row lies in [-(k-1)/s, out_h - 1 + (s+k-2)/s], so a zero border of k
// rows/columns around dy makes every tap read in bounds.
struct ParityClass {
  int nt = 0;             // taps that reach the class (none when s > k)
  int tap[kMaxTaps];      // kh * k + kw
  int dh[kMaxTaps];       // dy row of dx row a is a + dh
  int dw[kMaxTaps];       // dy column of dx column b is b + dw
  int rows = 0, cols = 0;  // dx pixels of the class: rows x cols, s apart
};

inline ParityClass parity_class(const ConvDims& d, int ph, int pw) {
  ParityClass c;
  const int s = d.stride, k = d.k;
  for (int kh = 0; kh < k; ++kh) {
    if ((ph + d.pad - kh) % s != 0) continue;
    for (int kw = 0; kw < k; ++kw) {
      if ((pw + d.pad - kw) % s != 0) continue;
      c.dh[c.nt] = floor_div(ph + d.pad - kh, s);
      c.dw[c.nt] = floor_div(pw + d.pad - kw, s);
      c.tap[c.nt++] = kh * k + kw;
    }
  }
  c.rows = ceil_div(d.h - ph, s);
  c.cols = ceil_div(d.w - pw, s);
  return c;
}

// A class no tap reaches has a zero gradient: written as such unless dx accumulates.
inline void zero_parity_class(const ConvDims& d, const ParityClass& c, int ph, int pw, float* dxn) {
  for (int a = 0; a < c.rows; ++a)
    for (int b = 0; b < c.cols; ++b)
      std::fill_n(dxn + (size_t(d.stride * a + ph) * d.w + d.stride * b + pw) * d.c_in, d.c_in, 0.0f);
}

}  // namespace mlpd::direct_conv
