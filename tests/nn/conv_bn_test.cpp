// The CNN building blocks (src/nn/conv_bn.h) under --precision bf16: units that keep their
// convolution's output, and inside a residual block their own output, as bf16 give bit for bit
// what the same units give keeping them in fp32, in forward, backward and the running statistics,
// for every kind of part of a backbone; and those buffers take half the bytes. (Its gradients against finite
// differences are checked through the models that use it: resnet_test, ssd_model_test, ...)
#include <gtest/gtest.h>

#include <cblas.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/arena.h"
#include "core/check.h"
#include "core/param_store.h"
#include "core/rng.h"
#include "kernels/device.h"
#include "nn/conv_bn.h"

using namespace mlpd;

namespace {

constexpr int kBatch = 3, kSide = 12, kChannels = 3;

// A stem with max pool, a basic block with an identity shortcut, a strided one with a projection,
// and a bottleneck block; stored in fp32 or bf16. inner: who reads the first two blocks' outputs.
struct Net {
  ParamStore store;
  DeviceBuffers buffers;
  std::vector<float> input;
  nn::Backbone body;
  Arena arena;
  explicit Net(Precision storage, nn::BlockOutput inner = nn::BlockOutput::read_outside) {
    openblas_set_num_threads(1);
    const nn::ConvBnSpec spec{kBatch, 0.9f, 1e-5f, storage};
    input.resize(size_t(kBatch) * kSide * kSide * kChannels);
    Rng r{5, 1};
    for (float& v : input) v = r.normal();
    body = nn::make_backbone(store, buffers, spec, input.data(), kSide, kSide, kChannels, 16, 3, 1, true);
    nn::add_basic_block(body, store, buffers, spec, "a", 16, 1, inner);
    nn::add_basic_block(body, store, buffers, spec, "b", 32, 2, inner);
    nn::add_bottleneck_block(body, store, buffers, spec, "c", 8, 1, nn::BlockOutput::read_outside);
    finalize_params(store);
    nn::init_backbone(body, store, 9, false);
    // Non-trivial gammas and betas, so no BN is the identity.
    for (size_t v = 0; v < store.views.size(); ++v) {
      if (store.views[v].kind != ParamKind::bias) continue;
      Rng g{17, v};
      float* p = param_ptr(store, v);
      for (size_t i = 0; i < store.views[v].count; ++i) p[i] += 0.3f * g.normal();
    }
    arena_init(arena, nn::scratch_floats(ops_for(Device::cpu, Precision::bf16), body, kBatch) * sizeof(float) + 4096);
  }
  size_t out_floats() const { return size_t(kBatch) * body.out_h * body.out_w * body.out_c; }
  std::vector<float> out() const { return {body.out, body.out + out_floats()}; }
  // The backbone's forward; round_inner rounds each block's output but the last to bf16 in place.
  void forward(const OpTable& o, bool train, bool round_inner = false) {
    arena_reset(arena);
    if (!round_inner) return nn::forward(o, body, store, arena, kBatch, train);
    nn::forward(o, body.stem, store, arena, kBatch, train);
    if (body.has_maxpool) nn::forward(o, body.pool, kBatch);
    for (size_t i = 0; i < body.blocks.size(); ++i) {
      const nn::ResidualBlock& blk = body.blocks[i];
      nn::forward(o, blk, store, arena, kBatch, train);
      if (i + 1 < body.blocks.size()) o.bf16_round(blk.out, blk.out, blk.out_per_image * kBatch);
    }
  }
  // A train step's forward and backward of the loss sum(out * dy) with a fixed dy.
  void step(const OpTable& o, bool round_inner = false) {
    forward(o, true, round_inner);
    std::vector<float> dy(out_floats());
    Rng r{23, 0};
    for (float& v : dy) v = r.normal();
    nn::backward(o, body, store, arena, kBatch, dy.data(), [](size_t) {});
  }
};

const OpTable& bf16_ops() { return ops_for(Device::cpu, Precision::bf16); }

}  // namespace

TEST(ConvBnBf16Storage, GivesTheBitsOfFp32StorageThroughEveryPartOfABackbone) {
  Net fp32_storage(Precision::fp32), bf16_storage(Precision::bf16);
  ASSERT_EQ(params_fingerprint(fp32_storage.store), params_fingerprint(bf16_storage.store));
  for (int i = 0; i < 2; ++i) {  // two steps: the second starts from accumulated gradients
    fp32_storage.step(bf16_ops());
    bf16_storage.step(bf16_ops());
    ASSERT_EQ(fp32_storage.out(), bf16_storage.out()) << "step " << i;
    ASSERT_EQ(fp32_storage.store.grads, bf16_storage.store.grads) << "step " << i;
    ASSERT_EQ(fp32_storage.store.state, bf16_storage.store.state) << "step " << i;  // running statistics
  }
  double norm = 0;
  for (float g : bf16_storage.store.grads) norm += double(g) * g;
  EXPECT_GT(norm, 0.0);
  // Eval mode (the running statistics) as well.
  nn::forward(bf16_ops(), fp32_storage.body, fp32_storage.store, fp32_storage.arena, kBatch, false);
  nn::forward(bf16_ops(), bf16_storage.body, bf16_storage.store, bf16_storage.arena, kBatch, false);
  EXPECT_EQ(fp32_storage.out(), bf16_storage.out());
}

TEST(ConvBnBf16Storage, HoldsEachConvOutputAndEachOutputInsideABlockInHalfTheBytes) {
  Net fp32_storage(Precision::fp32), bf16_storage(Precision::bf16);
  size_t halved = 0, buffers = 0;  // floats kept as bf16 over every unit of the backbone, and their count
  auto conv_output = [&](const nn::ConvBn& u) {
    halved += u.out_per_image * kBatch;
    ++buffers;
    EXPECT_NE(u.conv_y16, nullptr);
    EXPECT_EQ(u.conv.y, nullptr);
  };
  const nn::Backbone& b = bf16_storage.body;
  conv_output(b.stem);
  EXPECT_EQ(b.stem.y16, nullptr);
  for (const nn::ResidualBlock& blk : b.blocks) {
    for (size_t i = 0; i < blk.main.size(); ++i) {
      const nn::ConvBn& u = blk.main[i];
      conv_output(u);
      const bool inner = i + 1 < blk.main.size();  // read by the next unit's convolution only
      EXPECT_EQ(u.y16 != nullptr, inner);
      EXPECT_EQ(u.bn.y == nullptr, inner);
      EXPECT_EQ(u.x16 != nullptr, i > 0);
      if (inner) {
        halved += u.out_per_image * kBatch;
        ++buffers;
      }
    }
    if (blk.has_proj) {
      conv_output(blk.proj);
      EXPECT_EQ(blk.proj.y16, nullptr);
    }
  }
  EXPECT_EQ(fp32_storage.body.stem.conv_y16, nullptr);
  // Each of those buffers takes half the bytes (an odd count rounds up to a whole float).
  const size_t saved = fp32_storage.buffers.bytes - bf16_storage.buffers.bytes;
  EXPECT_GE(saved, halved * sizeof(uint16_t) - 2 * buffers);
  EXPECT_LE(saved, halved * sizeof(uint16_t));
}

// Block outputs that only the next block reads, kept as bf16: the residual stream is rounded at
// each block boundary, and nothing else changes. The same backbone in fp32 storage that rounds
// those outputs in place gives the same bits (rounding passes gradients through unchanged), the
// next block reading them through its first convolution, its projection (block b) and its
// identity shortcut (block c).
TEST(ConvBnBf16Storage, KeptBlockOutputsRoundTheResidualStreamAndNothingElse) {
  Net rounding(Precision::fp32), kept(Precision::bf16, nn::BlockOutput::next_block_only);
  const nn::Backbone& b = kept.body;
  ASSERT_EQ(b.blocks.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const nn::ResidualBlock& blk = b.blocks[i];
    EXPECT_EQ(blk.out16 != nullptr, i < 2) << i;
    EXPECT_EQ(blk.out == nullptr, i < 2) << i;
    EXPECT_EQ(blk.in16 != nullptr, i > 0) << i;
    EXPECT_EQ(blk.main[0].x16 != nullptr, i > 0) << i;
  }
  ASSERT_TRUE(b.blocks[1].has_proj);
  EXPECT_NE(b.blocks[1].proj.x16, nullptr);
  ASSERT_FALSE(b.blocks[2].has_proj);
  EXPECT_EQ(b.blocks[2].main.back().residual16, b.blocks[1].out16);
  EXPECT_EQ(b.blocks[2].main.back().bn.residual, nullptr);
  EXPECT_NE(b.out, nullptr);
  // Half the bytes of the two outputs it keeps, beside the same net keeping them in fp32.
  Net kept_fp32(Precision::bf16);
  const size_t outputs = (b.blocks[0].out_per_image + b.blocks[1].out_per_image) * kBatch;
  EXPECT_EQ(kept_fp32.buffers.bytes - kept.buffers.bytes, outputs * sizeof(uint16_t));

  ASSERT_EQ(params_fingerprint(rounding.store), params_fingerprint(kept.store));
  for (int i = 0; i < 2; ++i) {
    rounding.step(bf16_ops(), true);
    kept.step(bf16_ops());
    ASSERT_EQ(rounding.out(), kept.out()) << "step " << i;
    ASSERT_EQ(rounding.store.grads, kept.store.grads) << "step " << i;
    ASSERT_EQ(rounding.store.state, kept.store.state) << "step " << i;
  }
  rounding.forward(bf16_ops(), false, true);
  kept.forward(bf16_ops(), false);
  EXPECT_EQ(rounding.out(), kept.out());
  // And it is a change: without the rounding the outputs differ.
  kept_fp32.step(bf16_ops());
  kept_fp32.step(bf16_ops());
  kept_fp32.forward(bf16_ops(), false);
  EXPECT_NE(kept_fp32.out(), kept.out());
}

TEST(ConvBnBf16Storage, RefusesAnFp32OpTable) {
  // An fp32 convolution's output is not a bf16 value: storing it so would lose bits unseen.
  Net bf16_storage(Precision::bf16);
  EXPECT_THROW(nn::forward(cpu_ops(), bf16_storage.body, bf16_storage.store, bf16_storage.arena, kBatch, true),
               std::runtime_error);
}

TEST(ConvBnScratch, TheArenaSizeFromScratchFloatsIsEnoughAtEveryBatch) {
  // scratch_floats(n) must cover a step of n (arena_floats throws past the capacity).
  for (auto [p, inner] : {std::pair{Precision::fp32, nn::BlockOutput::read_outside},
                           std::pair{Precision::bf16, nn::BlockOutput::read_outside},
                           std::pair{Precision::bf16, nn::BlockOutput::next_block_only}}) {
    Net net(p, inner);
    const OpTable& o = ops_for(Device::cpu, p);
    for (int n = 1; n <= kBatch; ++n) {
      Arena a;
      arena_init(a, nn::scratch_floats(o, net.body, n) * sizeof(float));
      nn::forward(o, net.body, net.store, a, n, true);
      std::vector<float> dy(net.out_floats(), 0.5f);
      EXPECT_NO_THROW(nn::backward(o, net.body, net.store, a, n, dy.data(), [](size_t) {}))
          << compute_precision_name(p) << " n " << n;
    }
  }
}
