// The CUDA batch norm and pooling ops against the CPU ones, through the op tables.
// Batch norm: train forward with and without the fused residual and ReLU, eval forward, backward
// (with the ReLU mask, dx aliasing dy, dgamma/dbeta accumulating) at channel counts from 3 to 2048
// and row counts that are not multiples of a block; its backward must rerun to the same bits.
// Pooling: max pooling on inputs with many ties (the gradient goes to the first maximum) and
// integer gradients, so that forward and backward are exact whatever the summation order; average
// and global average pooling.
// Tolerances (fp32, |got - want| <= abs + rel*|want|): batch norm outputs and gradients 1e-4 +
// 1e-4*|want| (statistics accumulated in a different order), saved mean 1e-6 + 1e-5*|want|, eval
// 1e-5 + 1e-5*|want|; max pooling exact; average pooling 1e-6 + 1e-5*|want|.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_test_util.h"

using namespace mlpd;
using namespace mlpd::gpu_test;

namespace {

// ---- Batch norm ----
struct BnCase {
  int64_t rows;
  int c;
  bool residual, relu;
};

std::string bn_name(const ::testing::TestParamInfo<BnCase>& info) {
  const BnCase& b = info.param;
  return cat("rows", b.rows, "_c", b.c, b.residual ? "_residual" : "", b.relu ? "_relu" : "");
}

// Inputs of one batch-norm case, on the host; x has a mean of 2 so the variance is not trivial.
struct BnInputs {
  std::vector<float> x, gamma, beta, residual, running_mean, running_var, dy;
  explicit BnInputs(const BnCase& b) {
    const size_t n = size_t(b.rows) * b.c;
    x = random_floats(n, 40, 0.5f, 3.5f);
    gamma = random_floats(b.c, 41, 0.5f, 1.5f);
    beta = random_floats(b.c, 42, -0.5f, 0.5f);
    residual = random_floats(n, 43);
    running_mean = random_floats(b.c, 44);
    running_var = random_floats(b.c, 45, 0.5f, 2.0f);
    dy = random_floats(n, 46);
  }
};

constexpr float kMomentum = 0.9f, kEps = 1e-5f;
// Batch norm backward's scratch, by its contract: 4*c doubles (plus alignment slack).
size_t bn_scratch_bytes(int c) { return 4 * size_t(c) * sizeof(double) + 4096; }

class BatchNormGpu : public GpuTestWithParam<BnCase> {};

TEST_P(BatchNormGpu, TrainForwardMatchesCpu) {
  const BnCase b = GetParam();
  const BnInputs in(b);
  const size_t n = in.x.size();
  std::vector<float> rm = in.running_mean, rv = in.running_var, mean(b.c), invstd(b.c), y(n);
  cpu().batchnorm_forward_train(in.x.data(), b.rows, b.c, in.gamma.data(), in.beta.data(), kMomentum, kEps,
                                rm.data(), rv.data(), mean.data(), invstd.data(), y.data(),
                                b.residual ? in.residual.data() : nullptr, b.relu);
  DeviceBuffer<float> gx(in.x), gg(in.gamma), gb(in.beta), gres(in.residual), grm(in.running_mean),
      grv(in.running_var), gmean(b.c), ginvstd(b.c), gy(std::vector<float>(n, 777.0f));
  gpu().batchnorm_forward_train(gx.get(), b.rows, b.c, gg.get(), gb.get(), kMomentum, kEps, grm.get(), grv.get(),
                                gmean.get(), ginvstd.get(), gy.get(), b.residual ? gres.get() : nullptr, b.relu);
  EXPECT_TRUE(all_close("batchnorm y", gy.download(), y, 1e-4, 1e-4));
  EXPECT_TRUE(all_close("batchnorm save_mean", gmean.download(), mean, 1e-5, 1e-6));
  EXPECT_TRUE(all_close("batchnorm save_invstd", ginvstd.download(), invstd, 1e-4, 1e-4));
  EXPECT_TRUE(all_close("batchnorm running_mean", grm.download(), rm, 1e-5, 1e-6));
  EXPECT_TRUE(all_close("batchnorm running_var", grv.download(), rv, 1e-4, 1e-5));
}

TEST_P(BatchNormGpu, EvalForwardMatchesCpu) {
  const BnCase b = GetParam();
  const BnInputs in(b);
  std::vector<float> y(in.x.size());
  cpu().batchnorm_forward_eval(in.x.data(), b.rows, b.c, in.gamma.data(), in.beta.data(), in.running_mean.data(),
                               in.running_var.data(), kEps, y.data(), b.residual ? in.residual.data() : nullptr,
                               b.relu);
  DeviceBuffer<float> gx(in.x), gg(in.gamma), gb(in.beta), gres(in.residual), grm(in.running_mean),
      grv(in.running_var), gy(std::vector<float>(y.size(), 777.0f));
  gpu().batchnorm_forward_eval(gx.get(), b.rows, b.c, gg.get(), gb.get(), grm.get(), grv.get(), kEps, gy.get(),
                               b.residual ? gres.get() : nullptr, b.relu);
  EXPECT_TRUE(all_close("batchnorm eval y", gy.download(), y, 1e-5, 1e-5));
}

// The backward's inputs: the CPU forward's saved statistics and output (the ReLU mask), so that
// both devices see the same ones.
struct BnSaved {
  std::vector<float> mean, invstd, y;
};
BnSaved cpu_forward(const BnCase& b, const BnInputs& in) {
  BnSaved s{std::vector<float>(b.c), std::vector<float>(b.c), std::vector<float>(in.x.size())};
  std::vector<float> rm = in.running_mean, rv = in.running_var;
  cpu_ops().batchnorm_forward_train(in.x.data(), b.rows, b.c, in.gamma.data(), in.beta.data(), kMomentum, kEps,
                                    rm.data(), rv.data(), s.mean.data(), s.invstd.data(), s.y.data(),
                                    b.residual ? in.residual.data() : nullptr, b.relu);
  return s;
}

TEST_P(BatchNormGpu, BackwardMatchesCpu) {
  const BnCase b = GetParam();
  const BnInputs in(b);
  const BnSaved s = cpu_forward(b, in);
  const auto dgamma0 = random_floats(b.c, 47), dbeta0 = random_floats(b.c, 48);  // accumulated onto
  std::vector<float> dx(in.x.size()), dgamma = dgamma0, dbeta = dbeta0;
  Arena ca = host_arena(bn_scratch_bytes(b.c)), ga = device_arena(bn_scratch_bytes(b.c));
  const float* relu_out = b.relu ? s.y.data() : nullptr;
  cpu().batchnorm_backward(in.x.data(), in.dy.data(), relu_out, b.rows, b.c, in.gamma.data(), s.mean.data(),
                           s.invstd.data(), dx.data(), dgamma.data(), dbeta.data(), ca);

  DeviceBuffer<float> gx(in.x), gdy(in.dy), gy(s.y), gg(in.gamma), gmean(s.mean), ginvstd(s.invstd),
      gdx(std::vector<float>(dx.size(), 777.0f)), gdgamma(dgamma0), gdbeta(dbeta0);
  gpu().batchnorm_backward(gx.get(), gdy.get(), b.relu ? gy.get() : nullptr, b.rows, b.c, gg.get(), gmean.get(),
                           ginvstd.get(), gdx.get(), gdgamma.get(), gdbeta.get(), ga);
  EXPECT_TRUE(all_close("batchnorm_backward dx", gdx.download(), dx, 1e-4, 1e-4));
  EXPECT_TRUE(all_close("batchnorm_backward dgamma", gdgamma.download(), dgamma, 1e-4, 1e-4));
  EXPECT_TRUE(all_close("batchnorm_backward dbeta", gdbeta.download(), dbeta, 1e-4, 1e-4));
  EXPECT_EQ(ga.offset, 0u) << "scratch must be released on return";

  // dx may alias dy.
  DeviceBuffer<float> galias(in.dy), gdgamma2(dgamma0), gdbeta2(dbeta0);
  gpu().batchnorm_backward(gx.get(), galias.get(), b.relu ? gy.get() : nullptr, b.rows, b.c, gg.get(), gmean.get(),
                           ginvstd.get(), galias.get(), gdgamma2.get(), gdbeta2.get(), ga);
  EXPECT_TRUE(all_close("batchnorm_backward dx aliasing dy", galias.download(), dx, 1e-4, 1e-4));
}

TEST_P(BatchNormGpu, TwoRunsGiveTheSameBits) {
  const BnCase b = GetParam();
  const BnInputs in(b);
  const BnSaved s = cpu_forward(b, in);
  Arena ga = device_arena(bn_scratch_bytes(b.c));
  DeviceBuffer<float> gx(in.x), gdy(in.dy), gy(s.y), gg(in.gamma), gbeta(in.beta), gmean(s.mean),
      ginvstd(s.invstd), gres(in.residual);
  std::vector<float> runs[2][5];  // [run][forward y, forward invstd, dx, dgamma, dbeta]
  for (auto& r : runs) {
    DeviceBuffer<float> rm(in.running_mean), rv(in.running_var), fmean(b.c), finvstd(b.c), fy(in.x.size());
    gpu().batchnorm_forward_train(gx.get(), b.rows, b.c, gg.get(), gbeta.get(), kMomentum, kEps, rm.get(),
                                  rv.get(), fmean.get(), finvstd.get(), fy.get(),
                                  b.residual ? gres.get() : nullptr, b.relu);
    DeviceBuffer<float> dx(in.x.size()), dgamma(b.c), dbeta(b.c);
    gpu().batchnorm_backward(gx.get(), gdy.get(), b.relu ? gy.get() : nullptr, b.rows, b.c, gg.get(), gmean.get(),
                             ginvstd.get(), dx.get(), dgamma.get(), dbeta.get(), ga);
    r[0] = fy.download();
    r[1] = finvstd.download();
    r[2] = dx.download();
    r[3] = dgamma.download();
    r[4] = dbeta.download();
  }
  EXPECT_TRUE(same_bits("batchnorm_forward_train y", runs[0][0], runs[1][0]));
  EXPECT_TRUE(same_bits("batchnorm_forward_train save_invstd", runs[0][1], runs[1][1]));
  EXPECT_TRUE(same_bits("batchnorm_backward dx", runs[0][2], runs[1][2]));
  EXPECT_TRUE(same_bits("batchnorm_backward dgamma", runs[0][3], runs[1][3]));
  EXPECT_TRUE(same_bits("batchnorm_backward dbeta", runs[0][4], runs[1][4]));
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchNormGpu,
                         ::testing::Values(BnCase{7, 3, false, false},        // a few rows
                                           BnCase{37, 3, false, true},        // odd channel count
                                           BnCase{98, 64, true, true},        // 2 x 7x7 x 64, residual + ReLU
                                           BnCase{528, 256, true, false},     // 33 x 4x4 x 256, residual
                                           BnCase{45, 2048, false, true},     // 5 x 3x3 x 2048
                                           BnCase{4113, 16, false, false},    // many rows, few channels
                                           BnCase{6272, 64, false, true}),    // 2 x 56x56 x 64: long columns
                         bn_name);

// ---- Pooling ----
PoolDims pool(int n, int h, int w, int c, int k, int stride, int pad) {
  PoolDims d;
  d.n = n, d.h = h, d.w = w, d.c = c, d.k = k, d.stride = stride, d.pad = pad;
  return d;
}
size_t in_size(const PoolDims& d) { return size_t(d.n) * d.h * d.w * d.c; }
size_t out_size(const PoolDims& d) { return size_t(d.n) * d.out_h() * d.out_w() * d.c; }

std::string pool_name(const ::testing::TestParamInfo<PoolDims>& info) {
  const PoolDims& d = info.param;
  return cat("n", d.n, "_", d.h, "x", d.w, "x", d.c, "_k", d.k, "s", d.stride, "p", d.pad);
}

class PoolGpu : public GpuTestWithParam<PoolDims> {};

TEST_P(PoolGpu, MaxPoolIsExactAndRoutesToTheFirstMaximum) {
  const PoolDims d = GetParam();
  // 9 levels: most windows hold ties. Integer gradients: every sum is exact in any order.
  const auto x = random_levels(in_size(d), 50, 4, 0.25f), dy = random_levels(out_size(d), 51, 4, 1.0f);
  std::vector<float> y(out_size(d)), dx(in_size(d));
  cpu().maxpool_forward(d, x.data(), y.data());
  cpu().maxpool_backward(d, x.data(), dy.data(), dx.data());
  DeviceBuffer<float> gx(x), gdy(dy), gy(std::vector<float>(y.size(), 777.0f)),
      gdx(std::vector<float>(dx.size(), 777.0f));
  gpu().maxpool_forward(d, gx.get(), gy.get());
  gpu().maxpool_backward(d, gx.get(), gdy.get(), gdx.get());
  EXPECT_TRUE(all_equal("maxpool_forward y", gy.download(), y));
  EXPECT_TRUE(all_equal("maxpool_backward dx", gdx.download(), dx));
}

TEST_P(PoolGpu, MaxPoolForwardIsExactOnContinuousInputs) {
  const PoolDims d = GetParam();
  const auto x = random_floats(in_size(d), 52);
  std::vector<float> y(out_size(d));
  cpu().maxpool_forward(d, x.data(), y.data());
  DeviceBuffer<float> gx(x), gy(y.size());
  gpu().maxpool_forward(d, gx.get(), gy.get());
  EXPECT_TRUE(all_equal("maxpool_forward y", gy.download(), y));
}

TEST_P(PoolGpu, AvgPoolMatchesCpu) {
  const PoolDims d = GetParam();
  const auto x = random_floats(in_size(d), 53), dy = random_floats(out_size(d), 54);
  std::vector<float> y(out_size(d)), dx(in_size(d));
  cpu().avgpool_forward(d, x.data(), y.data());
  cpu().avgpool_backward(d, dy.data(), dx.data());
  DeviceBuffer<float> gx(x), gdy(dy), gy(std::vector<float>(y.size(), 777.0f)),
      gdx(std::vector<float>(dx.size(), 777.0f));
  gpu().avgpool_forward(d, gx.get(), gy.get());
  gpu().avgpool_backward(d, gdy.get(), gdx.get());
  EXPECT_TRUE(all_close("avgpool_forward y", gy.download(), y, 1e-5, 1e-6));
  EXPECT_TRUE(all_close("avgpool_backward dx", gdx.download(), dx, 1e-5, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(Shapes, PoolGpu,
                         ::testing::Values(pool(2, 15, 15, 5, 3, 2, 1),    // the ResNet stem pool, odd size
                                           pool(3, 16, 16, 64, 3, 2, 1),   // even size
                                           pool(2, 8, 9, 3, 2, 2, 0),      // 2x2, odd width
                                           pool(1, 7, 7, 2, 3, 1, 1),      // stride 1: heavy overlap
                                           pool(2, 10, 10, 4, 3, 3, 0),    // a leftover row and column
                                           pool(33, 6, 6, 40, 2, 2, 0)),   // batch of 33
                         pool_name);

struct GlobalPoolCase {
  int n, hw, c;
};

class GlobalPoolGpu : public GpuTestWithParam<GlobalPoolCase> {};

TEST_P(GlobalPoolGpu, ForwardAndBackwardMatchCpu) {
  const GlobalPoolCase g = GetParam();
  const size_t nx = size_t(g.n) * g.hw * g.c, ny = size_t(g.n) * g.c;
  const auto x = random_floats(nx, 55), dy = random_floats(ny, 56);
  std::vector<float> y(ny), dx(nx);
  cpu().global_avgpool_forward(x.data(), g.n, g.hw, g.c, y.data());
  cpu().global_avgpool_backward(dy.data(), g.n, g.hw, g.c, dx.data());
  DeviceBuffer<float> gx(x), gdy(dy), gy(std::vector<float>(ny, 777.0f)), gdx(std::vector<float>(nx, 777.0f));
  gpu().global_avgpool_forward(gx.get(), g.n, g.hw, g.c, gy.get());
  gpu().global_avgpool_backward(gdy.get(), g.n, g.hw, g.c, gdx.get());
  EXPECT_TRUE(all_close("global_avgpool_forward y", gy.download(), y, 1e-5, 1e-6));
  EXPECT_TRUE(all_close("global_avgpool_backward dx", gdx.download(), dx, 1e-6, 0.0));
}

INSTANTIATE_TEST_SUITE_P(Shapes, GlobalPoolGpu,
                         ::testing::Values(GlobalPoolCase{1, 1, 1}, GlobalPoolCase{5, 13, 7},
                                           GlobalPoolCase{3, 49, 2048}, GlobalPoolCase{33, 49, 64},
                                           GlobalPoolCase{2, 3136, 3}),
                         [](const ::testing::TestParamInfo<GlobalPoolCase>& i) {
                           return cat("n", i.param.n, "_hw", i.param.hw, "_c", i.param.c);
                         });

}  // namespace
