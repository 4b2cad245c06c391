// The CUDA convolution against the CPU one, through the op tables, at shapes that cover every
// kind of ResNet conv (1x1 and strided 1x1, 3x3 with stride 1 and 2, the 7x7 stride-2 stem, the
// 1-channel ResNet-20 stem) plus odd sizes, unpadded and non-square inputs, and batches that are
// not multiples of 32. Each CUDA function runs inside an arena of its own conv2d_scratch_floats
// and must hand the scratch back. Backward passes are checked for bit-identical reruns.
// Tolerance (fp32, GEMM-like reductions): |got - want| <= 1e-4 + 1e-4*|want|.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_test_util.h"

using namespace mlpd;
using namespace mlpd::gpu_test;

namespace {

constexpr double kRel = 1e-4, kAbs = 1e-4;

ConvDims conv(int n, int h, int w, int c_in, int c_out, int k, int stride, int pad) {
  ConvDims d;
  d.n = n, d.h = h, d.w = w, d.c_in = c_in, d.c_out = c_out, d.k = k, d.stride = stride, d.pad = pad;
  return d;
}

size_t x_size(const ConvDims& d) { return size_t(d.n) * d.h * d.w * d.c_in; }
size_t y_size(const ConvDims& d) { return size_t(d.n) * d.out_h() * d.out_w() * d.c_out; }
size_t w_size(const ConvDims& d) { return size_t(d.k) * d.k * d.c_in * d.c_out; }

std::string conv_name(const ::testing::TestParamInfo<ConvDims>& info) {
  const ConvDims& d = info.param;
  return cat("n", d.n, "_", d.h, "x", d.w, "x", d.c_in, "_to", d.c_out, "_k", d.k, "s", d.stride, "p", d.pad);
}

class ConvGpu : public GpuTestWithParam<ConvDims> {
 protected:
  // Arenas of exactly what each device's conv2d_scratch_floats asks for (plus alignment slack).
  Arena cpu_arena() const { return host_arena(cpu().conv2d_scratch_floats(GetParam()) * sizeof(float) + 4096); }
  Arena gpu_arena() const { return device_arena(gpu().conv2d_scratch_floats(GetParam()) * sizeof(float) + 4096); }
};

TEST_P(ConvGpu, ForwardMatchesCpu) {
  const ConvDims d = GetParam();
  const auto x = random_floats(x_size(d), 1), w = random_floats(w_size(d), 2);
  std::vector<float> y(y_size(d));
  Arena ca = cpu_arena(), ga = gpu_arena();
  cpu().conv2d_forward(d, x.data(), w.data(), y.data(), ca);
  DeviceBuffer<float> gx(x), gw(w), gy(std::vector<float>(y.size(), 777.0f));  // y is overwritten
  gpu().conv2d_forward(d, gx.get(), gw.get(), gy.get(), ga);
  EXPECT_TRUE(all_close("conv2d_forward y", gy.download(), y, kRel, kAbs));
  EXPECT_EQ(ga.offset, 0u) << "scratch must be released on return";
}

TEST_P(ConvGpu, BackwardDataMatchesCpuOverwritingAndAccumulating) {
  const ConvDims d = GetParam();
  const auto dy = random_floats(y_size(d), 3), w = random_floats(w_size(d), 4);
  const auto dx0 = random_floats(x_size(d), 5);
  Arena ca = cpu_arena(), ga = gpu_arena();
  DeviceBuffer<float> gdy(dy), gw(w);

  std::vector<float> dx(x_size(d), 0.0f);
  cpu().conv2d_backward_data(d, dy.data(), w.data(), dx.data(), ca, false);
  DeviceBuffer<float> gdx(std::vector<float>(dx.size(), 777.0f));  // overwritten
  gpu().conv2d_backward_data(d, gdy.get(), gw.get(), gdx.get(), ga, false);
  EXPECT_TRUE(all_close("conv2d_backward_data dx (overwrite)", gdx.download(), dx, kRel, kAbs));

  std::vector<float> acc = dx0;
  cpu().conv2d_backward_data(d, dy.data(), w.data(), acc.data(), ca, true);
  DeviceBuffer<float> gacc(dx0);
  gpu().conv2d_backward_data(d, gdy.get(), gw.get(), gacc.get(), ga, true);
  EXPECT_TRUE(all_close("conv2d_backward_data dx (accumulate)", gacc.download(), acc, kRel, kAbs));
  EXPECT_EQ(ga.offset, 0u) << "scratch must be released on return";
}

TEST_P(ConvGpu, BackwardWeightsAccumulateLikeCpu) {
  const ConvDims d = GetParam();
  const auto x = random_floats(x_size(d), 6), dy = random_floats(y_size(d), 7);
  const auto dw0 = random_floats(w_size(d), 8);
  Arena ca = cpu_arena(), ga = gpu_arena();
  std::vector<float> dw = dw0;
  cpu().conv2d_backward_weights(d, x.data(), dy.data(), dw.data(), ca);
  DeviceBuffer<float> gx(x), gdy(dy), gdw(dw0);
  gpu().conv2d_backward_weights(d, gx.get(), gdy.get(), gdw.get(), ga);
  EXPECT_TRUE(all_close("conv2d_backward_weights dw", gdw.download(), dw, kRel, kAbs));
  EXPECT_EQ(ga.offset, 0u) << "scratch must be released on return";
}

TEST_P(ConvGpu, TwoRunsGiveTheSameBits) {
  const ConvDims d = GetParam();
  Arena ga = gpu_arena();
  DeviceBuffer<float> gx(random_floats(x_size(d), 9)), gw(random_floats(w_size(d), 10));
  DeviceBuffer<float> gdy(random_floats(y_size(d), 11));
  std::vector<float> runs[2][3];  // [run][y, dx, dw]
  for (auto& r : runs) {
    DeviceBuffer<float> gy(y_size(d)), gdx(x_size(d)), gdw(w_size(d));  // zeroed
    gpu().conv2d_forward(d, gx.get(), gw.get(), gy.get(), ga);
    gpu().conv2d_backward_data(d, gdy.get(), gw.get(), gdx.get(), ga, false);
    gpu().conv2d_backward_weights(d, gx.get(), gdy.get(), gdw.get(), ga);
    r[0] = gy.download();
    r[1] = gdx.download();
    r[2] = gdw.download();
  }
  EXPECT_TRUE(same_bits("conv2d_forward y", runs[0][0], runs[1][0]));
  EXPECT_TRUE(same_bits("conv2d_backward_data dx", runs[0][1], runs[1][1]));
  EXPECT_TRUE(same_bits("conv2d_backward_weights dw", runs[0][2], runs[1][2]));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConvGpu,
    ::testing::Values(conv(2, 9, 9, 5, 7, 1, 1, 0),       // pointwise, odd channels
                      conv(3, 8, 8, 16, 32, 1, 2, 0),     // strided 1x1 (ResNet downsample)
                      conv(2, 11, 13, 6, 10, 3, 1, 1),    // non-square input
                      conv(3, 15, 15, 8, 12, 3, 2, 1),    // 3x3 stride 2, odd size
                      conv(2, 10, 10, 4, 4, 3, 2, 0),     // unpadded: the last input row is unused
                      conv(1, 5, 5, 1, 1, 3, 1, 0),       // one channel, no padding
                      conv(2, 23, 23, 3, 16, 7, 2, 3),    // the 7x7 stem, stride 2, pad 3
                      conv(4, 28, 28, 1, 16, 3, 1, 1),    // the ResNet-20 stem on 28x28x1
                      conv(33, 7, 7, 64, 64, 3, 1, 1),    // batch of 33
                      conv(2, 14, 14, 256, 256, 3, 1, 1), // ResNet-50 stage 3
                      conv(2, 7, 7, 512, 2048, 1, 1, 0)), // ResNet-50 stage 4 expansion
    conv_name);

}  // namespace
