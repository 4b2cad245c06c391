// The cuDNN convolution path (built only with MLPD_HAVE_CUDNN). cuDNN takes our NHWC activations
// as they are, but its NHWC filter layout is KRSC ([c_out, k, k, c_in]) where ours is HWIO
// ([k, k, c_in, c_out]): the weights are transposed into arena scratch before forward and
// backward data, and backward filter writes a KRSC gradient to scratch that is then transposed
// and ADDED into dw (our parameter gradients accumulate).
// Algorithms: per shape, cuDNN's heuristics (the *_v7 queries, no timing runs, so every rank and
// every run choose alike) ranked best first, keeping only those that are deterministic, plain
// fp32 FMA (the descriptor forbids TF32, so results compare with the CPU's; the bf16 ops allow
// TF32 tensor cores, runtime.h: set_tensor_core_math) and need at most 256 MiB of workspace. A
// call runs the first that fits in what is left of the arena; the descriptors and lists are
// cached per shape, math and data type for the life of the process.
// bf16 (the bf16 table's forward and backward data, kernels/op_table_bf16.cpp): the operands packed
// to 2-byte bf16 (the weights transposed first), bf16 tensor-core math with fp32 accumulation, and
// a bf16 output widened into the caller's fp32 buffer: the value the table's rounding gives, on
// tensor cores twice as fast as TF32's. Backward filter stays on the TF32 path: its gradient is
// fp32 (cuDNN's bf16 configuration would round it).
#ifdef MLPD_HAVE_CUDNN

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/conv_paths.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/runtime.h"

namespace mlpd::cuda {

namespace {

constexpr size_t kMaxWorkspaceBytes = size_t(256) << 20;
constexpr int kTransposeTile = 32;

// dst [cols, rows] (+)= src [rows, cols]^T, through a shared tile so that reads and writes are
// both coalesced (the +1 column keeps the tile's column reads free of bank conflicts).
__global__ void transpose_kernel(const float* __restrict__ src, int rows, int cols, float* __restrict__ dst,
                                 bool accumulate) {
  __shared__ float tile[kTransposeTile][kTransposeTile + 1];
  const int c0 = int(blockIdx.x) * kTransposeTile, r0 = int(blockIdx.y) * kTransposeTile;
  for (int i = int(threadIdx.y); i < kTransposeTile; i += int(blockDim.y)) {
    const int r = r0 + i, c = c0 + int(threadIdx.x);
    if (r < rows && c < cols) tile[i][threadIdx.x] = src[size_t(r) * cols + c];
  }
  __syncthreads();
  for (int i = int(threadIdx.y); i < kTransposeTile; i += int(blockDim.y)) {
    const int c = c0 + i, r = r0 + int(threadIdx.x);
    if (r < rows && c < cols) {
      float* p = dst + size_t(c) * rows + r;
      const float v = tile[threadIdx.x][i];
      *p = accumulate ? *p + v : v;
    }
  }
}

void transpose(const float* src, int rows, int cols, float* dst, bool accumulate) {
  const dim3 grid(unsigned((cols + kTransposeTile - 1) / kTransposeTile),
                  unsigned((rows + kTransposeTile - 1) / kTransposeTile));
  transpose_kernel<<<grid, dim3(kTransposeTile, 8), 0, stream()>>>(src, rows, cols, dst, accumulate);
  CUDA_CHECK_LAUNCH();
}

// The algorithm cannot run this shape: try the next one.
bool not_supported(cudnnStatus_t s) {
#ifdef CUDNN_STATUS_CATEGORY
  return CUDNN_STATUS_CATEGORY(s) == CUDNN_STATUS_NOT_SUPPORTED;  // cuDNN 9 refines the code
#else
  return s == CUDNN_STATUS_NOT_SUPPORTED;
#endif
}

// This call's tensors are not aligned as cuDNN wants (views into larger buffers): the call runs
// the implicit GEMM, the algorithms stay for other calls.
bool misaligned(cudnnStatus_t s) {
#if CUDNN_MAJOR >= 9
  return s == CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER;
#else
  (void)s;
  return false;
#endif
}

template <typename Algo>
struct Candidate {
  Algo algo;
  size_t workspace_bytes;
};

// One shape's descriptors and, per pass, its usable algorithms, best first.
struct Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  std::vector<Candidate<cudnnConvolutionFwdAlgo_t>> forward;
  std::vector<Candidate<cudnnConvolutionBwdDataAlgo_t>> backward_data;
  std::vector<Candidate<cudnnConvolutionBwdFilterAlgo_t>> backward_filter;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (x) cudnnDestroyTensorDescriptor(x);
  }
};

// The heuristics' ranking filtered to deterministic algorithms whose workspace cuDNN can size for
// these descriptors and that stays under the cap; each algorithm once. fp32 FMA math only, or,
// with tensor cores (the bf16 ops), also tensor-op math (TF32 on fp32 tensors, bf16 on bf16
// ones), never a conversion to fp16.
template <typename Algo, typename Perf, typename WorkspaceOf>
std::vector<Candidate<Algo>> usable(const std::vector<Perf>& ranked, int count, bool tensor_cores,
                                    WorkspaceOf workspace_of) {
  std::vector<Candidate<Algo>> out;
  for (int i = 0; i < count; ++i) {
    const Perf& p = ranked[size_t(i)];
    if (p.status != CUDNN_STATUS_SUCCESS || p.determinism != CUDNN_DETERMINISTIC) continue;
    if (p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
    if (p.mathType == CUDNN_TENSOR_OP_MATH && !tensor_cores) continue;
    bool seen = false;
    for (const auto& c : out) seen = seen || c.algo == p.algo;
    if (seen) continue;
    size_t bytes = 0;
    if (workspace_of(p.algo, &bytes) != CUDNN_STATUS_SUCCESS || bytes > kMaxWorkspaceBytes) continue;
    out.push_back({p.algo, bytes});
  }
  return out;
}

std::unique_ptr<Plan> make_plan(const ConvDims& d, bool tensor_cores, cudnnDataType_t type) {
  auto p = std::make_unique<Plan>();
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->y));
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w));
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->conv));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NHWC, type, d.n, d.c_in, d.h, d.w));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NHWC, type, d.n, d.c_out, d.out_h(), d.out_w()));
  // NHWC filter format = KRSC: [c_out (K), k (R), k (S), c_in (C)].
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w, type, CUDNN_TENSOR_NHWC, d.c_out, d.c_in, d.k, d.k));
  // Accumulation in fp32 for either type (cuDNN's PSEUDO_BFLOAT16 configuration for bf16).
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p->conv, d.pad, d.pad, d.stride, d.stride, 1, 1,
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, tensor_cores ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
  int on = 0, oc = 0, oh = 0, ow = 0;
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &on, &oc, &oh, &ow));
  if (on != d.n || oc != d.c_out || oh != d.out_h() || ow != d.out_w())
    throw std::runtime_error("cuDNN convolution: output " + std::to_string(oh) + "x" + std::to_string(ow) +
                             " differs from ConvDims' " + std::to_string(d.out_h()) + "x" +
                             std::to_string(d.out_w()));

  // A heuristics query that fails leaves the pass without candidates: it runs the implicit GEMM.
  const cudnnHandle_t h = dnn();
  int max_count = 0, got = 0;
  CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_count));
  std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd(size_t(max_count > 0 ? max_count : 1));
  if (cudnnGetConvolutionForwardAlgorithm_v7(h, p->x, p->w, p->conv, p->y, max_count, &got, fwd.data()) ==
      CUDNN_STATUS_SUCCESS)
    p->forward = usable<cudnnConvolutionFwdAlgo_t>(fwd, got, tensor_cores, [&](cudnnConvolutionFwdAlgo_t a, size_t* bytes) {
      return cudnnGetConvolutionForwardWorkspaceSize(h, p->x, p->w, p->conv, p->y, a, bytes);
    });

  max_count = got = 0;
  CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max_count));
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> bwd_data(size_t(max_count > 0 ? max_count : 1));
  if (cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p->w, p->y, p->conv, p->x, max_count, &got,
                                                  bwd_data.data()) == CUDNN_STATUS_SUCCESS)
    p->backward_data = usable<cudnnConvolutionBwdDataAlgo_t>(
        bwd_data, got, tensor_cores, [&](cudnnConvolutionBwdDataAlgo_t a, size_t* bytes) {
          return cudnnGetConvolutionBackwardDataWorkspaceSize(h, p->w, p->y, p->conv, p->x, a, bytes);
        });

  max_count = got = 0;
  CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max_count));
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> bwd_filter(size_t(max_count > 0 ? max_count : 1));
  if (cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p->x, p->y, p->conv, p->w, max_count, &got,
                                                    bwd_filter.data()) == CUDNN_STATUS_SUCCESS)
    p->backward_filter = usable<cudnnConvolutionBwdFilterAlgo_t>(
        bwd_filter, got, tensor_cores, [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* bytes) {
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p->x, p->y, p->conv, p->w, a, bytes);
        });
  return p;
}

// The cached plan of a shape (batch size included), math and data type. Plans live until the
// process ends. bf16 plans always use tensor-core math (its FMA algorithms stay candidates).
Plan& plan_for(const ConvDims& d, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  static std::mutex mutex;
  static std::map<std::array<int, 10>, std::unique_ptr<Plan>> plans;
  const bool bf16 = type == CUDNN_DATA_BFLOAT16;
  const bool tensor_cores = bf16 || tensor_core_math();
  const std::array<int, 10> key{d.n,   d.h,   d.w, d.c_in, d.c_out, d.k, d.stride, d.pad, tensor_cores ? 1 : 0,
                                bf16 ? 1 : 0};
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<Plan>& slot = plans[key];
  if (!slot) slot = make_plan(d, tensor_cores, type);
  return *slot;
}

size_t weight_floats(const ConvDims& d) { return size_t(d.k) * d.k * d.c_in * d.c_out; }
size_t image_floats(const ConvDims& d) { return size_t(d.n) * d.h * d.w * d.c_in; }
size_t output_floats(const ConvDims& d) { return size_t(d.n) * d.out_h() * d.out_w() * d.c_out; }
// Floats of arena that `halves` bf16 values take, with the arena's 64-byte alignment.
size_t halves_span(size_t halves) { return (halves + 1) / 2 + 16; }

// Bytes arena_bytes() can still hand out.
size_t arena_room_bytes(const Arena& a) {
  const size_t start = (a.offset + 63) & ~size_t(63);
  return a.capacity > start ? a.capacity - start : 0;
}

// Workspace from the arena, 256-byte aligned (the arena aligns to 64 only).
constexpr size_t kWorkspaceAlign = 256;
void* arena_workspace(Arena& arena, size_t bytes) {
  if (bytes == 0) return nullptr;
  const auto p = reinterpret_cast<uintptr_t>(arena_bytes(arena, bytes + kWorkspaceAlign));
  return reinterpret_cast<void*>((p + kWorkspaceAlign - 1) & ~uintptr_t(kWorkspaceAlign - 1));
}

// Runs `call(algo, workspace, bytes)` with the first candidate whose workspace fits in the arena.
// A candidate cuDNN then refuses as not supported is dropped for good and the next one tried;
// `before_first` runs once, before the first attempt. False when none is left that fits, or
// when cuDNN finds this call's pointers misaligned.
template <typename Algo, typename BeforeFirst, typename Call>
bool run_first_fitting(std::vector<Candidate<Algo>>& candidates, Arena& arena, const char* what,
                       BeforeFirst before_first, Call call) {
  const size_t mark = arena.offset;
  bool started = false;
  for (size_t i = 0; i < candidates.size();) {
    arena.offset = mark;
    const Candidate<Algo> c = candidates[i];
    if (c.workspace_bytes != 0 && c.workspace_bytes + kWorkspaceAlign > arena_room_bytes(arena)) {
      ++i;
      continue;
    }
    if (!started) {
      before_first();
      started = true;
    }
    const cudnnStatus_t s = call(c.algo, arena_workspace(arena, c.workspace_bytes), c.workspace_bytes);
    if (s == CUDNN_STATUS_SUCCESS) return true;
    if (misaligned(s)) return false;
    if (!not_supported(s)) fail(__FILE__, __LINE__, what, cudnnGetErrorString(s));
    candidates.erase(candidates.begin() + std::ptrdiff_t(i));
  }
  return false;
}

uint16_t* arena_halves(Arena& arena, size_t count) {
  return static_cast<uint16_t*>(arena_bytes(arena, count * sizeof(uint16_t)));
}

// A bf16 pass's operands, allocated before its candidates are tried (each attempt reuses the arena
// above them for its workspace) and filled before the first: the weights transposed to KRSC and
// packed, and the image operand packed unless its bf16 bits were given.
struct Bf16Operands {
  float* w_krsc;
  uint16_t* w16;
  uint16_t* packed;  // null when the caller gave bits
  const uint16_t* image16;

  Bf16Operands(const ConvDims& d, const float* image, const uint16_t* image_bits, size_t image_count, Arena& arena)
      : w_krsc(arena_floats(arena, weight_floats(d))),
        w16(arena_halves(arena, weight_floats(d))),
        packed(image_bits ? nullptr : arena_halves(arena, image_count)),
        image16(image_bits ? image_bits : packed),
        source(image),
        count(image_count) {}
  void fill(const ConvDims& d, const float* w) const {
    const int kkc = d.k * d.k * d.c_in;
    transpose(w, kkc, d.c_out, w_krsc, false);
    bf16_pack_rows(w_krsc, d.c_out, kkc, kkc, w16, kkc);
    const int per_image = int(count / size_t(d.n));
    if (packed) bf16_pack_rows(source, d.n, per_image, per_image, packed, per_image);
  }

 private:
  const float* source;
  size_t count;
};

}  // namespace

size_t cudnn_conv_bf16_scratch_floats(const ConvDims& d) {
  const Plan& p = plan_for(d, CUDNN_DATA_BFLOAT16);
  size_t workspace = 0;
  if (!p.forward.empty()) workspace = std::max(workspace, p.forward.front().workspace_bytes);
  if (!p.backward_data.empty()) workspace = std::max(workspace, p.backward_data.front().workspace_bytes);
  // Both images as bf16 (the input packed, the output cuDNN writes), the weights in fp32 KRSC and
  // as bf16, and the workspace.
  return halves_span(image_floats(d)) + halves_span(output_floats(d)) + weight_floats(d) + 16 +
         halves_span(weight_floats(d)) + (workspace + kWorkspaceAlign + sizeof(float) - 1) / sizeof(float) + 16;
}

bool cudnn_conv_forward_bf16(const ConvDims& d, const float* x, const uint16_t* x16, const float* w, float* y,
                             Arena& arena) {
  Plan& p = plan_for(d, CUDNN_DATA_BFLOAT16);
  if (p.forward.empty()) return false;
  ArenaScope scope(arena);
  uint16_t* y16 = arena_halves(arena, output_floats(d));
  const Bf16Operands in(d, x, x16, image_floats(d), arena);
  const float alpha = 1.0f, beta = 0.0f;
  const bool ran = run_first_fitting(
      p.forward, arena, "cudnnConvolutionForward (bf16)", [&] { in.fill(d, w); },
      [&](cudnnConvolutionFwdAlgo_t algo, void* ws, size_t bytes) {
        return cudnnConvolutionForward(dnn(), &alpha, p.x, in.image16, p.w, in.w16, p.conv, algo, ws, bytes, &beta,
                                       p.y, y16);
      });
  const int per_image = d.out_h() * d.out_w() * d.c_out;
  if (ran) bf16_unpack_rows(y16, d.n, per_image, per_image, y, per_image);
  return ran;
}

bool cudnn_conv_backward_data_bf16(const ConvDims& d, const float* dy, const uint16_t* dy16, const float* w,
                                   float* dx, Arena& arena) {
  Plan& p = plan_for(d, CUDNN_DATA_BFLOAT16);
  if (p.backward_data.empty()) return false;
  ArenaScope scope(arena);
  uint16_t* dx16 = arena_halves(arena, image_floats(d));
  const Bf16Operands in(d, dy, dy16, output_floats(d), arena);
  const float alpha = 1.0f, beta = 0.0f;
  const bool ran = run_first_fitting(
      p.backward_data, arena, "cudnnConvolutionBackwardData (bf16)", [&] { in.fill(d, w); },
      [&](cudnnConvolutionBwdDataAlgo_t algo, void* ws, size_t bytes) {
        return cudnnConvolutionBackwardData(dnn(), &alpha, p.w, in.w16, p.y, in.image16, p.conv, algo, ws, bytes,
                                            &beta, p.x, dx16);
      });
  const int per_image = d.h * d.w * d.c_in;
  if (ran) bf16_unpack_rows(dx16, d.n, per_image, per_image, dx, per_image);
  return ran;
}

size_t cudnn_conv_scratch_floats(const ConvDims& d) {
  const Plan& p = plan_for(d);
  size_t workspace = 0;
  if (!p.forward.empty()) workspace = std::max(workspace, p.forward.front().workspace_bytes);
  if (!p.backward_data.empty()) workspace = std::max(workspace, p.backward_data.front().workspace_bytes);
  if (!p.backward_filter.empty()) workspace = std::max(workspace, p.backward_filter.front().workspace_bytes);
  // KRSC weights (or weight gradient) + workspace, with the arena's 64-byte and the workspace's
  // 256-byte alignment.
  return weight_floats(d) + 16 + (workspace + kWorkspaceAlign + sizeof(float) - 1) / sizeof(float) + 16;
}

bool cudnn_conv_forward(const ConvDims& d, const float* x, const float* w, float* y, Arena& arena) {
  Plan& p = plan_for(d);
  ArenaScope scope(arena);
  float* w_krsc = arena_floats(arena, weight_floats(d));
  const float alpha = 1.0f, beta = 0.0f;
  return run_first_fitting(
      p.forward, arena, "cudnnConvolutionForward",
      [&] { transpose(w, d.k * d.k * d.c_in, d.c_out, w_krsc, false); },
      [&](cudnnConvolutionFwdAlgo_t algo, void* ws, size_t bytes) {
        return cudnnConvolutionForward(dnn(), &alpha, p.x, x, p.w, w_krsc, p.conv, algo, ws, bytes, &beta, p.y, y);
      });
}

bool cudnn_conv_backward_data(const ConvDims& d, const float* dy, const float* w, float* dx, Arena& arena,
                              bool accumulate) {
  Plan& p = plan_for(d);
  ArenaScope scope(arena);
  float* w_krsc = arena_floats(arena, weight_floats(d));
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  return run_first_fitting(
      p.backward_data, arena, "cudnnConvolutionBackwardData",
      [&] { transpose(w, d.k * d.k * d.c_in, d.c_out, w_krsc, false); },
      [&](cudnnConvolutionBwdDataAlgo_t algo, void* ws, size_t bytes) {
        return cudnnConvolutionBackwardData(dnn(), &alpha, p.w, w_krsc, p.y, dy, p.conv, algo, ws, bytes, &beta, p.x,
                                            dx);
      });
}

bool cudnn_conv_backward_weights(const ConvDims& d, const float* x, const float* dy, float* dw, Arena& arena) {
  Plan& p = plan_for(d);
  ArenaScope scope(arena);
  float* dw_krsc = arena_floats(arena, weight_floats(d));
  const float alpha = 1.0f, beta = 0.0f;
  const bool ran = run_first_fitting(
      p.backward_filter, arena, "cudnnConvolutionBackwardFilter", [] {},
      [&](cudnnConvolutionBwdFilterAlgo_t algo, void* ws, size_t bytes) {
        return cudnnConvolutionBackwardFilter(dnn(), &alpha, p.x, x, p.y, dy, p.conv, algo, ws, bytes, &beta, p.w,
                                              dw_krsc);
      });
  if (ran) transpose(dw_krsc, d.c_out, d.k * d.k * d.c_in, dw, true);  // KRSC [c_out, kkc] -> HWIO, added
  return ran;
}

}  // namespace mlpd::cuda

#endif  // MLPD_HAVE_CUDNN
