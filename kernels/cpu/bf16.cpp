// bf16 rounding and widening (kernels/op_signatures.inc: bf16_round*, bf16_pack_rows,
// bf16_unpack_rows, relu_backward_bf16): the bit tricks of core/bf16.h, which the compiler
// vectorizes.
#include <cstddef>

#include "core/bf16.h"
#include "kernels/ops.h"

namespace mlpd {

void bf16_round(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = round_to_bf16(x[i]);
}

void bf16_round_rows(const float* x, int rows, int width, int ld_x, float* y, int ld_y) {
  for (int r = 0; r < rows; ++r) bf16_round(x + size_t(r) * ld_x, y + size_t(r) * ld_y, size_t(width));
}

void bf16_pack_rows(const float* x, int rows, int width, int ld_x, uint16_t* y, int ld_y) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + size_t(r) * ld_x;
    uint16_t* yr = y + size_t(r) * ld_y;
    for (int j = 0; j < width; ++j) yr[j] = f32_to_bf16(xr[j]);
  }
}

void bf16_unpack_rows(const uint16_t* x, int rows, int width, int ld_x, float* y, int ld_y) {
  for (int r = 0; r < rows; ++r) {
    const uint16_t* xr = x + size_t(r) * ld_x;
    float* yr = y + size_t(r) * ld_y;
    for (int j = 0; j < width; ++j) yr[j] = bf16_to_f32(xr[j]);
  }
}

void relu_backward_bf16(const uint16_t* y16, const float* dy, float* dx, size_t n) {
  for (size_t i = 0; i < n; ++i) dx[i] = bf16_to_f32(y16[i]) > 0.0f ? dy[i] : 0.0f;
}

}  // namespace mlpd
