// The pointwise part of an LSTM step (gnmt), gates fused: the GEMMs x*W_x + h_prev*W_h are the
// caller's, this file turns their sum (`gates`, order i, f, g, o) into the new state and back.
// Rows past their sequence's end (lengths[r] <= t) keep their state and pass gradients through.
// Each row is a few passes over `hidden` contiguous floats (activate, combine), with exp and tanh
// written in plain arithmetic (exp_fast, tanh_fast) so that the compiler vectorises every loop:
// with libm's calls the pointwise part cost as much as the step's GEMMs at gnmt's sizes.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/fast_math.h"
#include "kernels/ops.h"

namespace mlpd {

namespace {

using cpu::exp_fast;
using cpu::tanh_fast;

inline float sigmoid_fast(float x) { return 1.0f / (1.0f + exp_fast(-x)); }

inline bool keeps_state(const int32_t* lengths, int r, int t) { return lengths && lengths[r] <= t; }

}  // namespace

void lstm_cell_forward(const float* gates, const float* c_prev, const float* h_prev, int ld_h_prev, int n,
                       int hidden, const int32_t* lengths, int t, float* acts, float* c, float* h, int ld_h) {
  const size_t H = size_t(hidden);
  for (int r = 0; r < n; ++r) {
    const float* gr = gates + size_t(r) * 4 * H;
    float* ar = acts + size_t(r) * 4 * H;
    const float* cp = c_prev + size_t(r) * H;
    const float* hp = h_prev + size_t(r) * size_t(ld_h_prev);
    float* cr = c + size_t(r) * H;
    float* hr = h + size_t(r) * size_t(ld_h);
    // The activated gates of every row (kept-state rows too), so that acts never holds stale data.
    for (size_t j = 0; j < 2 * H; ++j) ar[j] = sigmoid_fast(gr[j]);      // i, f
    for (size_t j = 2 * H; j < 3 * H; ++j) ar[j] = tanh_fast(gr[j]);     // g
    for (size_t j = 3 * H; j < 4 * H; ++j) ar[j] = sigmoid_fast(gr[j]);  // o
    if (keeps_state(lengths, r, t)) {
      if (cr != cp) std::memmove(cr, cp, sizeof(float) * H);
      if (hr != hp) std::memmove(hr, hp, sizeof(float) * H);
      continue;
    }
    const float *ig = ar, *fg = ar + H, *gg = ar + 2 * H, *og = ar + 3 * H;
    for (size_t j = 0; j < H; ++j) cr[j] = fg[j] * cp[j] + ig[j] * gg[j];  // c may alias c_prev
    for (size_t j = 0; j < H; ++j) hr[j] = og[j] * tanh_fast(cr[j]);
  }
}

void lstm_cell_backward(const float* acts, const float* c_prev, const float* c, const float* dh, int ld_dh,
                        const float* dc, int n, int hidden, const int32_t* lengths, int t, float* dgates,
                        float* dc_prev, float* dh_prev) {
  const size_t H = size_t(hidden);
  for (int r = 0; r < n; ++r) {
    const float* ar = acts + size_t(r) * 4 * H;
    const float* cp = c_prev + size_t(r) * H;
    const float* cr = c + size_t(r) * H;
    const float* dhr = dh + size_t(r) * size_t(ld_dh);
    const float* dcr = dc + size_t(r) * H;
    float* dgr = dgates + size_t(r) * 4 * H;
    float* dcp = dc_prev + size_t(r) * H;
    float* dhp = dh_prev + size_t(r) * H;
    if (keeps_state(lengths, r, t)) {
      std::memset(dgr, 0, sizeof(float) * 4 * H);
      if (dcp != dcr) std::memmove(dcp, dcr, sizeof(float) * H);
      std::memmove(dhp, dhr, sizeof(float) * H);
      continue;
    }
    const float *ig = ar, *fg = ar + H, *gg = ar + 2 * H, *og = ar + 3 * H;
    float* tc = dgr + 3 * H;  // tanh(c), parked in the o block until that block is written
    for (size_t j = 0; j < H; ++j) tc[j] = tanh_fast(cr[j]);
    for (size_t j = 0; j < H; ++j) {
      const float i = ig[j], f = fg[j], g = gg[j], o = og[j], th = tc[j], d = dhr[j];
      // dc_total = dc (from step t+1) + dh * o * (1 - tanh(c)^2); dc_prev may alias dc.
      const float dct = dcr[j] + d * o * (1.0f - th * th);
      dgr[j] = dct * g * i * (1.0f - i);               // through sigmoid(i)
      dgr[H + j] = dct * cp[j] * f * (1.0f - f);       // through sigmoid(f)
      dgr[2 * H + j] = dct * i * (1.0f - g * g);       // through tanh(g)
      dgr[3 * H + j] = d * th * o * (1.0f - o);        // through sigmoid(o)
      dcp[j] = dct * f;
      dhp[j] = 0.0f;
    }
  }
}

}  // namespace mlpd
