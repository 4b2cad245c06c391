// The emulator's cuDNN: the convolution calls of kernels/cuda/conv_cudnn.cu, on the host, so that
// the path every GPU build takes by default runs in the `gpu` tests here (its filter transposes,
// its algorithm lists and fallbacks, the bf16 tensor-core passes). It is a model of cuDNN, not a
// copy: plain loops, and only what conv_cudnn.cu asks for (NHWC tensors, KRSC filters,
// cross-correlation, no dilation, fp32 or bf16 data with fp32 accumulation). What it does check is
// what a GPU would refuse or break on:
//   - every tensor, filter and workspace pointer must lie inside a cudaMalloc allocation;
//   - a workspace smaller than the algorithm's size is a bad parameter;
//   - the workspace is overwritten (0x5A) before the operands are read, so an operand that shares
//     memory with it comes out wrong, as it would on a GPU that uses its workspace;
//   - tensor-op math on fp32 data rounds the operands to TF32 (10 mantissa bits), as tensor cores do;
//     bf16 data is read as bf16 and a bf16 output is rounded to nearest even;
//   - the tensor-op algorithms need 16-byte aligned pointers (else BAD_PARAM_MISALIGNED_POINTER)
//     and, on bf16 data, channel counts in multiples of 8 (else NOT_SUPPORTED when run, as a
//     heuristic's pick may be);
//   - the heuristics rank a non-deterministic algorithm and one that converts to fp16 among the
//     rest, which the caller must skip.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/bf16.h"
#include "kernels/emulate/runtime_state.h"

struct cudnnContext {
  cudaStream_t stream = nullptr;
};
struct cudnnTensorStruct {
  bool set = false;
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int n = 0, c = 0, h = 0, w = 0;
};
struct cudnnFilterStruct {
  bool set = false;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
  int k = 0, c = 0, h = 0, w = 0;
};
struct cudnnConvolutionStruct {
  bool set = false;
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  cudnnConvolutionMode_t mode = CUDNN_CONVOLUTION;
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

namespace {

// One convolution's shape, checked against the descriptors.
struct Shape {
  int n, h, w, c, k, r, s, oh, ow, pad_h, pad_w, stride_h, stride_w;
  cudnnDataType_t type;
  bool tensor_ops;
  size_t x_count() const { return size_t(n) * h * w * c; }
  size_t y_count() const { return size_t(n) * oh * ow * k; }
  size_t w_count() const { return size_t(k) * r * s * c; }
  size_t element_bytes() const { return type == CUDNN_DATA_BFLOAT16 ? 2 : 4; }
};

bool is_nhwc(const cudnnTensorStruct* t) { return t && t->set && t->format == CUDNN_TENSOR_NHWC; }

cudnnStatus_t shape_of(const cudnnTensorStruct* x, const cudnnFilterStruct* f, const cudnnConvolutionStruct* conv,
                       const cudnnTensorStruct* y, Shape* out) {
  if (!is_nhwc(x) || !f || !f->set || !conv || !conv->set) return CUDNN_STATUS_BAD_PARAM;
  if (f->format != CUDNN_TENSOR_NHWC || conv->mode != CUDNN_CROSS_CORRELATION || conv->dilation_h != 1 ||
      conv->dilation_w != 1 || conv->compute != CUDNN_DATA_FLOAT)
    return CUDNN_STATUS_NOT_SUPPORTED;
  if (x->type != f->type || (x->type != CUDNN_DATA_FLOAT && x->type != CUDNN_DATA_BFLOAT16))
    return CUDNN_STATUS_NOT_SUPPORTED;
  if (f->c != x->c) return CUDNN_STATUS_BAD_PARAM;
  Shape s{x->n, x->h, x->w, x->c, f->k, f->h, f->w, 0, 0, conv->pad_h, conv->pad_w, conv->stride_h, conv->stride_w,
          x->type, conv->math == CUDNN_TENSOR_OP_MATH || conv->math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION};
  s.oh = (s.h + 2 * s.pad_h - s.r) / s.stride_h + 1;
  s.ow = (s.w + 2 * s.pad_w - s.s) / s.stride_w + 1;
  if (s.oh <= 0 || s.ow <= 0) return CUDNN_STATUS_BAD_PARAM;
  if (y) {
    if (!is_nhwc(y) || y->type != x->type) return CUDNN_STATUS_NOT_SUPPORTED;
    if (y->n != s.n || y->c != s.k || y->h != s.oh || y->w != s.ow) return CUDNN_STATUS_BAD_PARAM;
  }
  *out = s;
  return CUDNN_STATUS_SUCCESS;
}

// The workspace an algorithm asks for: none for the plain ones, a per-shape amount for the others.
size_t workspace_bytes(const Shape& s, int algo) {
  return algo == 1 ? sizeof(int) * size_t(s.oh) * s.ow * s.r * s.s + 256 : 0;
}

// Algorithm 1 of each pass is the tensor-op one (fp32 FMA without tensor-op math).
template <class Perf, class Algo>
void fill_perf(Perf* p, int algo, const Shape& s, bool deterministic, cudnnMathType_t math) {
  std::memset(p, 0, sizeof(Perf));
  p->algo = static_cast<Algo>(algo);
  p->status = CUDNN_STATUS_SUCCESS;
  p->time = -1.0f;
  p->memory = workspace_bytes(s, algo);
  p->determinism = deterministic ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC;
  p->mathType = math;
}

// Ranked best first: a non-deterministic algorithm (0), the tensor-op one (1), with tensor-op math
// also a variant of it that may convert to fp16, then a plain one (2 for forward, 1 FMA otherwise).
template <class Perf, class Algo>
int rank(const Shape& s, int requested, Perf* out) {
  std::vector<Perf> list(4);
  int count = 0;
  fill_perf<Perf, Algo>(&list[size_t(count++)], 0, s, false, CUDNN_FMA_MATH);
  fill_perf<Perf, Algo>(&list[size_t(count++)], 1, s, true, s.tensor_ops ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH);
  if (s.tensor_ops) fill_perf<Perf, Algo>(&list[size_t(count++)], 1, s, true, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
  fill_perf<Perf, Algo>(&list[size_t(count++)], 2, s, true, CUDNN_FMA_MATH);
  const int n = std::min(requested, count);
  for (int i = 0; i < n; ++i) out[i] = list[size_t(i)];
  return n;
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

void require_device(const void* p, size_t bytes, const char* call, const char* what) {
  if (bytes != 0 && !mlpd_emulate::is_device_range(p, bytes)) {
    char msg[256];
    std::snprintf(msg, sizeof msg, "%s: %s (%zu bytes at %p) is not inside one device allocation", call, what, bytes,
                  p);
    mlpd_emulate::die(msg);
  }
}

// The checks a run shares: the algorithm, the workspace, the pointers; then the workspace is
// overwritten before anything is read.
cudnnStatus_t prepare_run(const Shape& s, int algo, void* ws, size_t ws_bytes, const char* call,
                          std::initializer_list<std::pair<const void*, size_t>> operands) {
  if (algo < 0 || algo > 2) return CUDNN_STATUS_BAD_PARAM;
  for (const auto& [p, bytes] : operands) require_device(p, bytes, call, "an operand");
  const size_t need = workspace_bytes(s, algo);
  if (ws_bytes < need || (need > 0 && !ws)) return CUDNN_STATUS_BAD_PARAM;
  require_device(ws, ws_bytes, call, "the workspace");
  if (algo == 1 && s.tensor_ops) {
    for (const auto& [p, bytes] : operands)
      if (!aligned16(p)) return CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER;
    if (s.type == CUDNN_DATA_BFLOAT16 && (s.c % 8 != 0 || s.k % 8 != 0)) return CUDNN_STATUS_NOT_SUPPORTED;
  }
  mlpd_emulate::note_queued_work();
  if (ws_bytes) std::memset(ws, 0x5A, ws_bytes);
  return CUDNN_STATUS_SUCCESS;
}

// TF32: the nearest value with 10 mantissa bits (ties to even), as tensor cores read fp32.
float round_to_tf32(float v) {
  if (!std::isfinite(v)) return v;
  uint32_t b;
  std::memcpy(&b, &v, 4);
  b += 0x0FFFu + ((b >> 13) & 1u);
  b &= ~0x1FFFu;
  std::memcpy(&v, &b, 4);
  return v;
}

// An operand as fp32 values: bf16 widened, or fp32 (TF32-rounded under tensor-op math).
std::vector<float> read(const Shape& s, const void* p, size_t count, bool tensor_op_algo) {
  std::vector<float> v(count);
  if (s.type == CUDNN_DATA_BFLOAT16) {
    const auto* h = static_cast<const uint16_t*>(p);
    for (size_t i = 0; i < count; ++i) v[i] = mlpd::bf16_to_f32(h[i]);
  } else {
    std::memcpy(v.data(), p, count * sizeof(float));
    if (tensor_op_algo && s.tensor_ops)
      for (float& x : v) x = round_to_tf32(x);
  }
  return v;
}

// out = alpha * sum + beta * out (beta 0: out is not read), stored in the data type.
void write(const Shape& s, void* p, const std::vector<float>& sum, const void* alpha_p, const void* beta_p) {
  const float alpha = *static_cast<const float*>(alpha_p), beta = *static_cast<const float*>(beta_p);
  for (size_t i = 0; i < sum.size(); ++i) {
    if (s.type == CUDNN_DATA_BFLOAT16) {
      auto* h = static_cast<uint16_t*>(p);
      const float old = beta != 0.0f ? beta * mlpd::bf16_to_f32(h[i]) : 0.0f;
      h[i] = mlpd::f32_to_bf16(alpha * sum[i] + old);
    } else {
      auto* f = static_cast<float*>(p);
      f[i] = alpha * sum[i] + (beta != 0.0f ? beta * f[i] : 0.0f);
    }
  }
}

// Calls f(n, oh, ow, ih, iw, r, s) for every output pixel and filter tap that lands in the image.
template <class F>
void for_each_tap(const Shape& s, F f) {
  for (int n = 0; n < s.n; ++n)
    for (int oh = 0; oh < s.oh; ++oh)
      for (int ow = 0; ow < s.ow; ++ow)
        for (int r = 0; r < s.r; ++r) {
          const int ih = oh * s.stride_h - s.pad_h + r;
          if (ih < 0 || ih >= s.h) continue;
          for (int t = 0; t < s.s; ++t) {
            const int iw = ow * s.stride_w - s.pad_w + t;
            if (iw < 0 || iw >= s.w) continue;
            f(n, oh, ow, ih, iw, r, t);
          }
        }
}

enum class Pass { forward, backward_data, backward_filter };

// One pass over the image (x or dx), filter (w or dw) and output-side (y or dy) tensors: the two
// it reads taken as fp32, the one it writes (`out`, one of the three) summed over every tap.
cudnnStatus_t convolve(Pass pass, const Shape& s, int algo, void* ws, size_t ws_bytes, const char* call,
                       const void* x, const void* w, const void* y, void* out, const void* alpha, const void* beta) {
  const size_t e = s.element_bytes();
  const cudnnStatus_t st =
      prepare_run(s, algo, ws, ws_bytes, call, {{x, s.x_count() * e}, {w, s.w_count() * e}, {y, s.y_count() * e}});
  if (st != CUDNN_STATUS_SUCCESS) return st;
  // A tensor the pass reads, as fp32 (empty for the one it writes).
  const auto input = [&](Pass writes, const void* p, size_t count) {
    return pass == writes ? std::vector<float>() : read(s, p, count, algo == 1);
  };
  const std::vector<float> xv = input(Pass::backward_data, x, s.x_count());
  const std::vector<float> wv = input(Pass::backward_filter, w, s.w_count());
  const std::vector<float> yv = input(Pass::forward, y, s.y_count());
  std::vector<float> sum(pass == Pass::forward ? s.y_count() : pass == Pass::backward_data ? s.x_count() : s.w_count(),
                         0.0f);
  for_each_tap(s, [&](int n, int oh, int ow, int ih, int iw, int r, int t) {
    const size_t xo = ((size_t(n) * s.h + ih) * s.w + iw) * s.c, yo = ((size_t(n) * s.oh + oh) * s.ow + ow) * s.k;
    for (int k = 0; k < s.k; ++k) {
      const size_t wo = ((size_t(k) * s.r + r) * s.s + t) * s.c;
      if (pass == Pass::forward) {
        float acc = 0.0f;
        for (int c = 0; c < s.c; ++c) acc += xv[xo + c] * wv[wo + c];
        sum[yo + k] += acc;
      } else if (pass == Pass::backward_data) {
        for (int c = 0; c < s.c; ++c) sum[xo + c] += yv[yo + k] * wv[wo + c];
      } else {
        for (int c = 0; c < s.c; ++c) sum[wo + c] += yv[yo + k] * xv[xo + c];
      }
    }
  });
  write(s, out, sum, alpha, beta);
  return CUDNN_STATUS_SUCCESS;
}

// The handle and the descriptors: plain heap objects.
template <class Object>
cudnnStatus_t create(Object** out) {
  *out = new Object;
  return CUDNN_STATUS_SUCCESS;
}
template <class Object>
cudnnStatus_t destroy(Object* p) {
  delete p;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t algorithm_count(int* count) {
  *count = 4;  // what rank() lists at most
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

const char* cudnnGetErrorString(cudnnStatus_t status) {
  switch (status) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER: return "CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    default: return "CUDNN_STATUS (emulated: other)";
  }
}

cudnnStatus_t cudnnCreate(cudnnHandle_t* d) { return create(d); }
cudnnStatus_t cudnnDestroy(cudnnHandle_t d) { return destroy(d); }
cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
  handle->stream = stream;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* d) { return create(d); }
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) { return destroy(d); }
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t format, cudnnDataType_t type,
                                         int n, int c, int h, int w) {
  if (n <= 0 || c <= 0 || h <= 0 || w <= 0) return CUDNN_STATUS_BAD_PARAM;
  *d = cudnnTensorStruct{true, format, type, n, c, h, w};
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* d) { return create(d); }
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) { return destroy(d); }
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t type, cudnnTensorFormat_t format,
                                         int k, int c, int h, int w) {
  if (k <= 0 || c <= 0 || h <= 0 || w <= 0) return CUDNN_STATUS_BAD_PARAM;
  *d = cudnnFilterStruct{true, type, format, k, c, h, w};
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* d) { return create(d); }
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) { return destroy(d); }
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h, int pad_w, int u, int v,
                                              int dilation_h, int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t compute) {
  if (pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 || dilation_h <= 0 || dilation_w <= 0) return CUDNN_STATUS_BAD_PARAM;
  d->set = true;
  d->pad_h = pad_h, d->pad_w = pad_w, d->stride_h = u, d->stride_w = v;
  d->dilation_h = dilation_h, d->dilation_w = dilation_w, d->mode = mode, d->compute = compute;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t math) {
  d->math = math;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t conv,
                                                    const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
                                                    int* n, int* c, int* h, int* wd) {
  Shape s;
  const cudnnStatus_t st = shape_of(x, w, conv, nullptr, &s);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  *n = s.n, *c = s.k, *h = s.oh, *wd = s.ow;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t, int* count) {
  return algorithm_count(count);
}
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t, int* count) {
  return algorithm_count(count);
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnnHandle_t, int* count) {
  return algorithm_count(count);
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t, const cudnnTensorDescriptor_t x,
                                                     const cudnnFilterDescriptor_t w,
                                                     const cudnnConvolutionDescriptor_t conv,
                                                     const cudnnTensorDescriptor_t y, const int requested,
                                                     int* returned, cudnnConvolutionFwdAlgoPerf_t* perf) {
  Shape s;
  const cudnnStatus_t st = shape_of(x, w, conv, y, &s);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  *returned = rank<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(s, requested, perf);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t, const cudnnFilterDescriptor_t w,
                                                          const cudnnTensorDescriptor_t dy,
                                                          const cudnnConvolutionDescriptor_t conv,
                                                          const cudnnTensorDescriptor_t dx, const int requested,
                                                          int* returned, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
  Shape s;
  const cudnnStatus_t st = shape_of(dx, w, conv, dy, &s);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  *returned = rank<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(s, requested, perf);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t, const cudnnTensorDescriptor_t x,
                                                            const cudnnTensorDescriptor_t dy,
                                                            const cudnnConvolutionDescriptor_t conv,
                                                            const cudnnFilterDescriptor_t dw, const int requested,
                                                            int* returned,
                                                            cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
  Shape s;
  const cudnnStatus_t st = shape_of(x, dw, conv, dy, &s);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  *returned = rank<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(s, requested, perf);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t, const cudnnTensorDescriptor_t x,
                                                      const cudnnFilterDescriptor_t w,
                                                      const cudnnConvolutionDescriptor_t conv,
                                                      const cudnnTensorDescriptor_t y, cudnnConvolutionFwdAlgo_t algo,
                                                      size_t* bytes) {
  Shape s;
  const cudnnStatus_t st = shape_of(x, w, conv, y, &s);
  if (st == CUDNN_STATUS_SUCCESS) *bytes = workspace_bytes(s, int(algo));
  return st;
}
cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t, const cudnnFilterDescriptor_t w,
                                                           const cudnnTensorDescriptor_t dy,
                                                           const cudnnConvolutionDescriptor_t conv,
                                                           const cudnnTensorDescriptor_t dx,
                                                           cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
  Shape s;
  const cudnnStatus_t st = shape_of(dx, w, conv, dy, &s);
  if (st == CUDNN_STATUS_SUCCESS) *bytes = workspace_bytes(s, int(algo));
  return st;
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t, const cudnnTensorDescriptor_t x,
                                                             const cudnnTensorDescriptor_t dy,
                                                             const cudnnConvolutionDescriptor_t conv,
                                                             const cudnnFilterDescriptor_t dw,
                                                             cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
  Shape s;
  const cudnnStatus_t st = shape_of(x, dw, conv, dy, &s);
  if (st == CUDNN_STATUS_SUCCESS) *bytes = workspace_bytes(s, int(algo));
  return st;
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t, const void* alpha, const cudnnTensorDescriptor_t x_desc,
                                      const void* x, const cudnnFilterDescriptor_t w_desc, const void* w,
                                      const cudnnConvolutionDescriptor_t conv, cudnnConvolutionFwdAlgo_t algo,
                                      void* ws, size_t ws_bytes, const void* beta,
                                      const cudnnTensorDescriptor_t y_desc, void* y) {
  Shape s;
  const cudnnStatus_t st = shape_of(x_desc, w_desc, conv, y_desc, &s);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  return convolve(Pass::forward, s, int(algo), ws, ws_bytes, "cudnnConvolutionForward", x, w, y, y, alpha, beta);
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t, const void* alpha, const cudnnFilterDescriptor_t w_desc,
                                           const void* w, const cudnnTensorDescriptor_t dy_desc, const void* dy,
                                           const cudnnConvolutionDescriptor_t conv, cudnnConvolutionBwdDataAlgo_t algo,
                                           void* ws, size_t ws_bytes, const void* beta,
                                           const cudnnTensorDescriptor_t dx_desc, void* dx) {
  Shape s;
  const cudnnStatus_t st = shape_of(dx_desc, w_desc, conv, dy_desc, &s);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  return convolve(Pass::backward_data, s, int(algo), ws, ws_bytes, "cudnnConvolutionBackwardData", dx, w, dy, dx,
                  alpha, beta);
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t, const void* alpha, const cudnnTensorDescriptor_t x_desc,
                                             const void* x, const cudnnTensorDescriptor_t dy_desc, const void* dy,
                                             const cudnnConvolutionDescriptor_t conv,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void* ws, size_t ws_bytes,
                                             const void* beta, const cudnnFilterDescriptor_t dw_desc, void* dw) {
  Shape s;
  const cudnnStatus_t st = shape_of(x_desc, dw_desc, conv, dy_desc, &s);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  return convolve(Pass::backward_filter, s, int(algo), ws, ws_bytes, "cudnnConvolutionBackwardFilter", x, dw, dy, dw,
                  alpha, beta);
}

}  // extern "C"
