// Convolution + batch norm (+ ReLU) units and ResNet basic blocks as building blocks of CNN
// backbones (resnet, the ssd and maskrcnn backbones and ssd's extra layers, the minigo tower).
// Each unit owns its output and its convolution's output (what the BN's backward reads), allocated
// once at build from the model's DeviceBuffers. The gradient at the convolution's output lives only
// inside the unit's backward, so it is Arena scratch, shared by all units.
//
// With --precision bf16 a unit keeps its convolution's output as bf16 (half the bytes): the bf16
// convolution already rounds it to bf16 values, so nothing is lost; its BN reads it widened. Inside
// a residual block a unit's output (but the last's) is kept as bf16 too: the next convolution
// rounds it anyway, and the unit's ReLU mask is the same on the rounded value. So far bf16 storage
// changes no bit of a bf16 run (tests/nn/conv_bn_test.cpp).
// A backbone's block outputs that only the next block reads are kept as bf16 too, as PyTorch's
// autocast keeps them. That one does change bits: the next block's identity shortcut adds the
// rounded value, so the residual stream is rounded to bf16 at every block boundary.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/param_store.h"
#include "core/precision.h"
#include "kernels/device.h"
#include "nn/layers.h"

namespace mlpd::nn {

using ReadyFn = std::function<void(size_t view)>;

struct ConvBnSpec {
  int max_batch = 1;
  float bn_momentum = 0.9f;
  float bn_eps = 1e-5f;
  Precision precision = Precision::fp32;  // the run's: bf16 stores the conv outputs as bf16
};

struct ConvBn {
  Conv2d conv;
  BatchNorm bn;         // bn.y is the unit's output; bn.relu fuses the ReLU (and bn.residual the add)
  int out_h = 0, out_w = 0, c_out = 0;
  size_t out_per_image = 0;
  // bf16 storage: the conv's output [max_batch, out_per_image] as bf16, and conv.y, bn.x are null
  // (each pass points them at Arena scratch); fp32: null, and conv.y == bn.x is the output.
  uint16_t* conv_y16 = nullptr;
  // bf16 storage inside a residual block, where only the next unit's convolution reads a unit's
  // output (it rounds what it reads), and at a block's last unit whose output only the next block
  // reads: that output as bf16 (bn.y null), and the next unit's input (conv.x null). Null elsewhere.
  uint16_t* y16 = nullptr;
  const uint16_t* x16 = nullptr;
  // bf16 storage: the residual its BN adds, kept as bf16 (bn.residual null): a block's input that
  // the previous block kept as bf16, read by the identity shortcut.
  const uint16_t* residual16 = nullptr;
};

// Registers conv weight, gamma, beta (in that order) and the running statistics.
ConvBn make_conv_bn(ParamStore& s, DeviceBuffers& buf, const ConvBnSpec& spec, const std::string& name,
                    const float* x, int h, int w, int c_in, int c_out, int k, int stride, int pad, bool relu);
void forward(const OpTable& o, const ConvBn& u, ParamStore& s, Arena& a, int n, bool train);
// dy: gradient at the unit's output (the fused ReLU's mask is applied here). dx nullable (the stem);
// accumulate_dx adds into dx. Calls ready(beta), ready(gamma), ready(conv weight).
void backward(const OpTable& o, const ConvBn& u, ParamStore& s, Arena& a, int n, const float* dy, float* dx,
              bool accumulate_dx, const ReadyFn& ready);
size_t scratch_floats(const OpTable& o, const ConvBn& u, int n);
// He-normal (fan_out) conv weight, gamma 1 (0 with zero_gamma), beta 0, running mean 0, var 1;
// view v draws from Rng{seed, v}.
void init_conv_bn(const ConvBn& u, ParamStore& s, uint64_t seed, bool zero_gamma = false);
double conv_flops_per_image(const Conv2d& c);  // 2 * multiply-adds

// A ResNet residual block: relu(main(x) + shortcut(x)), main a chain of conv+BN units (ReLU after
// each but the last, whose BN fuses the add and the final ReLU), the shortcut a 1x1 conv + BN where
// the stride or the width changes, else the identity.
//   basic:      3x3 (stride), 3x3                         (ResNet-18/34, resnet20, ssd backbones)
//   bottleneck: 1x1, 3x3 (stride), 1x1 to 4x the width    (ResNet-50 v1.5: the stride on the 3x3)
struct ResidualBlock {
  std::vector<ConvBn> main;
  bool has_proj = false;
  ConvBn proj;
  // The input, fp32 or (under bf16 storage) bf16, and the output likewise (the last unit's bn.y or
  // y16): one of each pair is null.
  const float* in = nullptr;
  const uint16_t* in16 = nullptr;
  float* out = nullptr;
  uint16_t* out16 = nullptr;
  size_t in_per_image = 0, out_per_image = 0;
  int out_h = 0, out_w = 0, c_out = 0;
};

struct UnitShape {
  int c_out, k, stride, pad;
};
// The input x, or x16 where the previous block keeps its output as bf16; output_bf16: keep this
// block's output as bf16 (bf16 storage only; only another block may read it then).
struct BlockIo {
  const float* x = nullptr;
  const uint16_t* x16 = nullptr;
  bool output_bf16 = false;
};
// Units registered in order (each: conv weight, gamma, beta), then the shortcut.
ResidualBlock make_residual_block(ParamStore& s, DeviceBuffers& buf, const ConvBnSpec& spec, const std::string& name,
                                  const BlockIo& io, int h, int w, int c_in, const std::vector<UnitShape>& units);
ResidualBlock make_basic_block(ParamStore& s, DeviceBuffers& buf, const ConvBnSpec& spec, const std::string& name,
                               const BlockIo& io, int h, int w, int c_in, int c_out, int stride);
ResidualBlock make_bottleneck_block(ParamStore& s, DeviceBuffers& buf, const ConvBnSpec& spec,
                                    const std::string& name, const BlockIo& io, int h, int w, int c_in, int width,
                                    int stride);
void forward(const OpTable& o, const ResidualBlock& blk, ParamStore& s, Arena& a, int n, bool train);
// Views become ready in reverse registration order: the shortcut, then the units from the last.
void backward(const OpTable& o, const ResidualBlock& blk, ParamStore& s, Arena& a, int n, const float* dy, float* dx,
              bool accumulate_dx, const ReadyFn& ready);
size_t scratch_floats(const OpTable& o, const ResidualBlock& blk, int n);
// zero_init_residual: the last unit's gamma starts at 0 (the block starts as its shortcut).
void init_residual_block(const ResidualBlock& blk, ParamStore& s, uint64_t seed, bool zero_init_residual);
double flops_per_image(const ResidualBlock& blk);

}  // namespace mlpd::nn

namespace mlpd::nn {

// A ResNet-style backbone: a conv+BN+ReLU stem, an optional 3x3/2 max pool, then residual blocks.
// Owns the gradient buffers between its parts; backward runs down to the stem (no input gradient).
struct Backbone {
  ConvBn stem;
  bool has_maxpool = false;
  MaxPool pool;
  float* dpool_in = nullptr;  // gradient at the stem's output when the pool follows
  std::vector<ResidualBlock> blocks;
  float* dblock_in[2] = {nullptr, nullptr};  // gradients at block inputs, block i's in [i % 2]
  size_t dblock_in_floats = 0;
  const float* out = nullptr;     // the last part's output (null where it is kept as bf16: out16)
  const uint16_t* out16 = nullptr;
  int out_h = 0, out_w = 0, out_c = 0;
  double flops = 0.0;             // forward, per image
};

// The stem (k x k, stride, padding k/2) over `input` [h, w, c] per image, and the pool if asked.
Backbone make_backbone(ParamStore& s, DeviceBuffers& buf, const ConvBnSpec& spec, const float* input, int h, int w,
                       int c, int stem_channels, int stem_kernel, int stem_stride, bool maxpool);
// Who reads a block's output: the next block alone (under bf16 storage it is then kept as bf16),
// or layers outside the backbone too (the head, an FPN's laterals, ssd's extra layers: kept fp32).
enum class BlockOutput { next_block_only, read_outside };
inline BlockOutput block_output(bool read_outside) {
  return read_outside ? BlockOutput::read_outside : BlockOutput::next_block_only;
}
// Appends a basic block (bottleneck: a bottleneck block of that width) reading the current output.
void add_basic_block(Backbone& b, ParamStore& s, DeviceBuffers& buf, const ConvBnSpec& spec, const std::string& name,
                     int c_out, int stride, BlockOutput out);
void add_bottleneck_block(Backbone& b, ParamStore& s, DeviceBuffers& buf, const ConvBnSpec& spec,
                          const std::string& name, int width, int stride, BlockOutput out);
void forward(const OpTable& o, const Backbone& b, ParamStore& s, Arena& a, int n, bool train);
// dy: gradient at `out`. Views ready in reverse registration order (blocks from the last, the stem).
void backward(const OpTable& o, const Backbone& b, ParamStore& s, Arena& a, int n, const float* dy, const ReadyFn& ready);
// The same where other layers also read inner block outputs (an FPN's lateral inputs):
// block_dy[i], where non-null, is the gradient from those readers at block i's output (i below the
// last block), added to the one coming back through block i + 1.
void backward(const OpTable& o, const Backbone& b, ParamStore& s, Arena& a, int n, const float* dy, const ReadyFn& ready,
              const std::vector<const float*>& block_dy);
size_t scratch_floats(const OpTable& o, const Backbone& b, int n);
void init_backbone(const Backbone& b, ParamStore& s, uint64_t seed, bool zero_init_residual);

}  // namespace mlpd::nn
