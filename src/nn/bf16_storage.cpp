#include "nn/bf16_storage.h"

#include <limits>

#include "core/check.h"

namespace mlpd::nn {

void pack_items(const OpTable& o, const float* x, int n, size_t per_item, uint16_t* x16) {
  const int w = static_cast<int>(per_item);
  o.bf16_pack_rows(x, n, w, w, x16, w);
}

SavedActivation make_saved_activation(DeviceBuffers& buf, size_t per_item, int max_items, bool bf16) {
  MLPD_CHECK(per_item <= size_t(std::numeric_limits<int>::max()), "bf16_storage: an item too large for one row");
  SavedActivation v;
  v.per_item = per_item;
  if (bf16)
    v.b16 = buf.halves(per_item * size_t(max_items));
  else
    v.f32 = buf.floats(per_item * size_t(max_items));
  return v;
}

float* write_target(const SavedActivation& v, Arena& a, int items) {
  return v.b16 ? arena_floats(a, size_t(items) * v.per_item) : v.f32;
}

void keep(const OpTable& o, const SavedActivation& v, const float* y, int items) {
  if (!v.b16) return;
  // Packing an fp32 table's output would lose bits that an fp32 run keeps.
  MLPD_CHECK(o.precision == Precision::bf16, "bf16_storage: a bf16 activation written by an fp32 op table");
  pack_items(o, y, items, v.per_item, v.b16);
}

const float* read_saved(const OpTable& o, const SavedActivation& v, Arena& a, int items) {
  return v.b16 ? bf16_widened_rows(o, a, v.b16, items, v.per_item) : v.f32;
}

void relu_backward_saved(const OpTable& o, const SavedActivation& v, int items, float* dy) {
  const size_t n = size_t(items) * v.per_item;
  if (v.b16)
    o.relu_backward_bf16(v.b16, dy, dy, n);
  else
    o.relu_backward(v.f32, dy, dy, n);
}

size_t scratch_floats(const SavedActivation& v, int items) {
  return v.b16 ? arena_span(size_t(items) * v.per_item) : 0;
}

void linear_backward_saved(const OpTable& o, const Linear& l, const SavedActivation& x, ParamStore& s, int items,
                           const float* dy, float* dx) {
  MLPD_CHECK(l.in > 0 && x.per_item % size_t(l.in) == 0, "bf16_storage: a saved input that is not rows of the layer's");
  const size_t rows = size_t(items) * (x.per_item / size_t(l.in));
  MLPD_CHECK(rows <= size_t(std::numeric_limits<int>::max()), "bf16_storage: too many rows for one GEMM");
  if (!x.b16) {
    Linear fp32 = l;
    fp32.x = x.f32;
    return backward(o, fp32, s, int(rows), dy, dx);
  }
  MLPD_CHECK(o.precision == Precision::bf16, "bf16_storage: a bf16 activation read by an fp32 op table");
  linear_backward_bf16_input(o.device, x.b16, dy, int(rows), l.in, l.out, param_ptr(s, l.w), dx, grad_ptr(s, l.w),
                             grad_ptr(s, l.b));
}

void forward_image_bf16(const OpTable& o, const Conv2d& l, const uint16_t* x16, ParamStore& s, Arena& a, int n) {
  MLPD_CHECK(o.precision == Precision::bf16, "bf16_storage: a bf16 activation read by an fp32 op table");
  conv2d_forward_bf16_input(o.device, with_n(l.dims, n), x16, param_ptr(s, l.w), l.y, a);
}

void backward_image_bf16(const OpTable& o, const Conv2d& l, const uint16_t* x16, ParamStore& s, Arena& a, int n,
                         const float* dy, float* dx, bool accumulate_dx) {
  MLPD_CHECK(o.precision == Precision::bf16, "bf16_storage: a bf16 activation read by an fp32 op table");
  const ConvDims d = with_n(l.dims, n);
  conv2d_backward_weights_bf16_input(o.device, d, x16, dy, grad_ptr(s, l.w), a);
  if (dx) o.conv2d_backward_data(d, dy, param_ptr(s, l.w), dx, a, accumulate_dx);
}

size_t scratch_floats_image_bf16(const OpTable& o, const Conv2d& l, int n) {
  return conv2d_scratch_floats_bf16_input(o.device, with_n(l.dims, n), Bf16Operand::image);
}

}  // namespace mlpd::nn
