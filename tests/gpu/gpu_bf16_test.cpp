// The bf16 compute precision on the GPU against the CPU: the rounding ops bit for bit, and the
// CUDA bf16 table's GEMM, fully connected layer and convolution against the CPU bf16 table. Both
// multiply the same bf16 operands exactly and accumulate in fp32 (CUDA on bf16 tensor cores for
// GEMMs and, with cuDNN, for forward and backward-data convolutions; TF32 for the other
// convolutions), in different orders; an output rounded to bf16 may then land one bf16 step (2^-8 relative) apart:
// tolerance 1e-2 relative + 1e-3 absolute, and weight gradients (fp32, not rounded) 1e-3 + 1e-3.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "gpu_test_util.h"
#include "kernels/cuda/conv_bf16.h"
#include "kernels/cuda/runtime.h"

using namespace mlpd;
using namespace mlpd::gpu_test;

namespace {

const OpTable& cpu16() { return ops_for(Device::cpu, Precision::bf16); }
const OpTable& gpu16() { return ops_for(Device::cuda, Precision::bf16); }
constexpr double kRel = 1e-2, kAbs = 1e-3;

TEST_F(GpuTest, Bf16RoundingHasTheCpuBits) {
  std::vector<float> x = random_floats(100003, 40, -1e4f, 1e4f);
  x[0] = std::numeric_limits<float>::quiet_NaN();
  x[1] = std::numeric_limits<float>::max();
  x[2] = 1.0f + std::ldexp(1.0f, -8);  // a tie
  std::vector<float> want(x.size());
  cpu().bf16_round(x.data(), want.data(), x.size());
  DeviceBuffer<float> gx(x), gy(x.size());
  gpu().bf16_round(gx.get(), gy.get(), x.size());
  EXPECT_TRUE(same_bits("bf16_round", gy.download(), want));
  gpu().bf16_round(gx.get(), gx.get(), x.size());  // in place
  EXPECT_TRUE(same_bits("bf16_round in place", gx.download(), want));

  const int rows = 33, width = 17, ld_x = 20, ld_y = 19;
  const auto src = random_floats(size_t(rows) * ld_x, 41);
  std::vector<float> dst(size_t(rows) * ld_y, 3.0f);
  DeviceBuffer<float> gsrc(src), gdst(dst);
  cpu().bf16_round_rows(src.data(), rows, width, ld_x, dst.data(), ld_y);
  gpu().bf16_round_rows(gsrc.get(), rows, width, ld_x, gdst.get(), ld_y);
  EXPECT_TRUE(same_bits("bf16_round_rows", gdst.download(), dst));

  std::vector<uint16_t> packed(size_t(rows) * ld_y, 0xabcd);
  DeviceBuffer<uint16_t> gpacked(packed);
  cpu().bf16_pack_rows(src.data(), rows, width, ld_x, packed.data(), ld_y);
  gpu().bf16_pack_rows(gsrc.get(), rows, width, ld_x, gpacked.get(), ld_y);
  EXPECT_EQ(gpacked.download(), packed) << "bf16_pack_rows";

  std::vector<float> widened(size_t(rows) * ld_x, 5.0f);
  DeviceBuffer<float> gwidened(widened);
  cpu().bf16_unpack_rows(packed.data(), rows, width, ld_y, widened.data(), ld_x);
  gpu().bf16_unpack_rows(gpacked.get(), rows, width, ld_y, gwidened.get(), ld_x);
  EXPECT_TRUE(same_bits("bf16_unpack_rows", gwidened.download(), widened));

  // The ReLU mask off the packed bits (about half of them negative).
  const size_t count = size_t(rows) * ld_y;
  const auto dy = random_floats(count, 42);
  std::vector<float> masked(count);
  DeviceBuffer<float> gdy(dy), gmasked(count);
  cpu().relu_backward_bf16(packed.data(), dy.data(), masked.data(), count);
  gpu().relu_backward_bf16(gpacked.get(), gdy.get(), gmasked.get(), count);
  EXPECT_TRUE(same_bits("relu_backward_bf16", gmasked.download(), masked));
  gpu().relu_backward_bf16(gpacked.get(), gdy.get(), gdy.get(), count);  // in place
  EXPECT_TRUE(same_bits("relu_backward_bf16 in place", gdy.download(), masked));
}

// The op itself on packed operands: both devices sum exact products in fp32, in different orders.
TEST_F(GpuTest, GemmBf16OpMatchesTheCpuOp) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (float beta : {0.0f, 0.5f}) {
        const int m = 45, n = 77, k = 389, pad = 2;
        const int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
        const int lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
        const auto a = random_floats(size_t(a_rows) * lda, 54), b = random_floats(size_t(b_rows) * ldb, 55);
        std::vector<uint16_t> a16(a.size()), b16(b.size());
        for (size_t i = 0; i < a.size(); ++i) a16[i] = f32_to_bf16(a[i]);
        for (size_t i = 0; i < b.size(); ++i) b16[i] = f32_to_bf16(b[i]);
        const auto c0 = random_floats(size_t(m) * ldc, 56);
        std::vector<float> want = c0;
        cpu().gemm_bf16(ta, tb, m, n, k, 0.75f, a16.data(), lda, b16.data(), ldb, beta, want.data(), ldc);
        DeviceBuffer<uint16_t> ga(a16), gb(b16);
        DeviceBuffer<float> gc(c0);
        gpu().gemm_bf16(ta, tb, m, n, k, 0.75f, ga.get(), lda, gb.get(), ldb, beta, gc.get(), ldc);
        EXPECT_TRUE(all_close(cat("gemm_bf16 ", ta, tb, " beta ", beta), gc.download(), want, 1e-4, 1e-4));
      }
  const int n = 1000, out = 3;
  const auto dy = random_floats(size_t(n) * out, 57);
  std::vector<float> db(out, 0.5f);
  DeviceBuffer<float> gdy(dy), gdb(db);
  cpu().bias_grad(dy.data(), n, out, db.data());
  gpu().bias_grad(gdy.get(), n, out, gdb.get());
  EXPECT_TRUE(all_close("bias_grad", gdb.download(), db, 1e-5, 1e-5));
}

TEST_F(GpuTest, Bf16GemmMatchesTheCpuBf16Gemm) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (float beta : {0.0f, 1.0f}) {
        const int m = 67, n = 129, k = 300, pad = 3;
        const int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
        const int lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
        const auto a = random_floats(size_t(a_rows) * lda, 42), b = random_floats(size_t(b_rows) * ldb, 43);
        const auto c0 = random_floats(size_t(m) * ldc, 44);
        std::vector<float> want = c0;
        cpu16().gemm(ta, tb, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, beta, want.data(), ldc);
        DeviceBuffer<float> ga(a), gb(b), gc(c0);
        gpu16().gemm(ta, tb, m, n, k, 1.0f, ga.get(), lda, gb.get(), ldb, beta, gc.get(), ldc);
        EXPECT_TRUE(all_close(cat("bf16 gemm ", ta, tb, " beta ", beta), gc.download(), want, kRel, kAbs));
      }
}

TEST_F(GpuTest, Bf16LinearMatchesTheCpuBf16Linear) {
  const int n = 96, in = 200, out = 70;
  const auto x = random_floats(size_t(n) * in, 45), w = random_floats(size_t(in) * out, 46);
  const auto b = random_floats(out, 47), dy = random_floats(size_t(n) * out, 48);
  std::vector<float> y(size_t(n) * out), dx(size_t(n) * in), dw(size_t(in) * out, 0.0f), db(out, 0.0f);
  cpu16().linear_forward(x.data(), n, in, out, w.data(), b.data(), y.data());
  cpu16().linear_backward(x.data(), dy.data(), n, in, out, w.data(), dx.data(), dw.data(), db.data());
  DeviceBuffer<float> gx(x), gw(w), gb(b), gdy(dy), gy(y.size()), gdx(dx.size()), gdw(dw.size()), gdb(db.size());
  gpu16().linear_forward(gx.get(), n, in, out, gw.get(), gb.get(), gy.get());
  gpu16().linear_backward(gx.get(), gdy.get(), n, in, out, gw.get(), gdx.get(), gdw.get(), gdb.get());
  EXPECT_TRUE(all_close("bf16 linear y", gy.download(), y, kRel, kAbs));
  EXPECT_TRUE(all_close("bf16 linear dx", gdx.download(), dx, kRel, kAbs));
  EXPECT_TRUE(all_close("bf16 linear dw", gdw.download(), dw, 1e-3, 1e-3));
  EXPECT_TRUE(all_close("bf16 linear db", gdb.download(), db, 1e-3, 1e-3));
}

TEST_F(GpuTest, Bf16ConvolutionMatchesTheCpuBf16Convolution) {
  ConvDims d;
  d.n = 4, d.h = 14, d.w = 14, d.c_in = 32, d.c_out = 64, d.k = 3, d.stride = 1, d.pad = 1;
  const size_t nx = size_t(d.n) * d.h * d.w * d.c_in, ny = size_t(d.n) * d.out_h() * d.out_w() * d.c_out;
  const size_t nw = size_t(d.k) * d.k * d.c_in * d.c_out;
  const auto x = random_floats(nx, 49), w = random_floats(nw, 50), dy = random_floats(ny, 51);
  Arena ca = host_arena(cpu16().conv2d_scratch_floats(d) * sizeof(float) + 4096);
  Arena ga = device_arena(gpu16().conv2d_scratch_floats(d) * sizeof(float) + 4096);
  std::vector<float> y(ny), dx(nx), dw(nw, 0.0f);
  cpu16().conv2d_forward(d, x.data(), w.data(), y.data(), ca);
  cpu16().conv2d_backward_data(d, dy.data(), w.data(), dx.data(), ca, false);
  cpu16().conv2d_backward_weights(d, x.data(), dy.data(), dw.data(), ca);
  DeviceBuffer<float> gx(x), gw(w), gdy(dy), gy(ny), gdx(nx), gdw(nw);
  gpu16().conv2d_forward(d, gx.get(), gw.get(), gy.get(), ga);
  gpu16().conv2d_backward_data(d, gdy.get(), gw.get(), gdx.get(), ga, false);
  gpu16().conv2d_backward_weights(d, gx.get(), gdy.get(), gdw.get(), ga);
  EXPECT_TRUE(all_close("bf16 conv y", gy.download(), y, kRel, kAbs));
  EXPECT_TRUE(all_close("bf16 conv dx", gdx.download(), dx, kRel, kAbs));
  EXPECT_TRUE(all_close("bf16 conv dw", gdw.download(), dw, 1e-3, 1e-3));
  // The fp32 table is back in fp32 math after a bf16 op: its GEMM still meets fp32 tolerance.
  std::vector<float> c(size_t(64) * 64), want(c.size());
  const auto a = random_floats(64 * 512, 52), b = random_floats(512 * 64, 53);
  cpu().gemm(false, false, 64, 64, 512, 1.0f, a.data(), 512, b.data(), 64, 0.0f, want.data(), 64);
  DeviceBuffer<float> gA(a), gB(b), gC(c.size());
  gpu().gemm(false, false, 64, 64, 512, 1.0f, gA.get(), 512, gB.get(), 64, 0.0f, gC.get(), 64);
  EXPECT_TRUE(all_close("fp32 gemm after bf16 ops", gC.download(), want, 1e-4, 1e-4));
}

// The bf16 tensor-core convolutions (kernels/cuda/conv_bf16.h): they run wherever the build has
// cuDNN and MLPD_CUDA_CONV does not say implicit (a silent fallback to the TF32 path would hide a
// refusal: this test then fails), and nowhere else; where they run, each pass matches the CPU's
// bf16 table, and the image operand given as bf16 bits gives the bits that packing it gives.
// Shapes of the mini ResNet (3x3 same, 3x3 stride 2, the 1x1 stride-2 projection) and of ssd's
// extra layers (1x1 reduce, 3x3 stride 2 down to 2x2 and to 1x1).
TEST_F(GpuTest, Bf16TensorCoreConvolutionsRunWithCudnnAndMatchTheCpu) {
  const char* env = std::getenv("MLPD_CUDA_CONV");
  const bool want_ran = cuda::cudnn_version() > 0 && !(env && std::string(env) == "implicit");
  const std::string path = cuda::conv2d_bf16_path_name();
  EXPECT_EQ(path.rfind("cudnn", 0) == 0, want_ran) << path;
  struct Shape {
    int n, hw, c_in, c_out, k, stride, pad;
  };
  for (const Shape s : {Shape{4, 16, 16, 32, 3, 1, 1}, Shape{3, 16, 32, 64, 3, 2, 1}, Shape{2, 8, 32, 64, 1, 2, 0},
                        Shape{8, 4, 64, 32, 1, 1, 0}, Shape{8, 4, 32, 64, 3, 2, 1}, Shape{8, 2, 32, 64, 3, 2, 1}}) {
    ConvDims d;
    d.n = s.n, d.h = s.hw, d.w = s.hw, d.c_in = s.c_in, d.c_out = s.c_out, d.k = s.k, d.stride = s.stride,
    d.pad = s.pad;
    const size_t nx = size_t(d.n) * d.h * d.w * d.c_in, ny = size_t(d.n) * d.out_h() * d.out_w() * d.c_out;
    const size_t nw = size_t(d.k) * d.k * d.c_in * d.c_out;
    const auto x = random_floats(nx, 70 + s.k), w = random_floats(nw, 71 + s.stride), dy = random_floats(ny, 72);
    std::vector<uint16_t> x16(nx), dy16(ny);
    for (size_t i = 0; i < nx; ++i) x16[i] = f32_to_bf16(x[i]);
    for (size_t i = 0; i < ny; ++i) dy16[i] = f32_to_bf16(dy[i]);
    Arena ca = host_arena(cpu16().conv2d_scratch_floats(d) * sizeof(float) + 4096);
    std::vector<float> y(ny), dx(nx);
    cpu16().conv2d_forward(d, x.data(), w.data(), y.data(), ca);
    cpu16().conv2d_backward_data(d, dy.data(), w.data(), dx.data(), ca, false);

    const size_t scratch = cuda::conv2d_bf16_tensor_core_scratch_floats(d);
    EXPECT_EQ(scratch > 0, want_ran);
    Arena ga = device_arena(scratch * sizeof(float) + 4096);
    DeviceBuffer<float> gx(x), gw(w), gdy(dy), gy(ny), gdx(nx), gy_bits(ny), gdx_bits(nx);
    DeviceBuffer<uint16_t> gx16(x16), gdy16(dy16);
    const std::string shape = cat("n", d.n, " ", d.h, "x", d.w, " ", d.c_in, "->", d.c_out, " k", d.k, " s", d.stride);
    ASSERT_EQ(cuda::conv2d_forward_bf16_tensor_cores(d, gx.get(), nullptr, gw.get(), gy.get(), ga), want_ran) << shape;
    ASSERT_EQ(cuda::conv2d_backward_data_bf16_tensor_cores(d, gdy.get(), nullptr, gw.get(), gdx.get(), ga), want_ran)
        << shape;
    EXPECT_EQ(ga.offset, 0u) << "the passes give their scratch back";
    if (!want_ran) continue;
    ASSERT_TRUE(cuda::conv2d_forward_bf16_tensor_cores(d, nullptr, gx16.get(), gw.get(), gy_bits.get(), ga));
    ASSERT_TRUE(cuda::conv2d_backward_data_bf16_tensor_cores(d, nullptr, gdy16.get(), gw.get(), gdx_bits.get(), ga));
    const auto gpu_y = gy.download(), gpu_dx = gdx.download();
    EXPECT_TRUE(all_close(cat("tensor-core y, ", shape), gpu_y, y, kRel, kAbs));
    EXPECT_TRUE(all_close(cat("tensor-core dx, ", shape), gpu_dx, dx, kRel, kAbs));
    EXPECT_TRUE(same_bits(cat("y from x's bits, ", shape), gy_bits.download(), gpu_y));
    EXPECT_TRUE(same_bits(cat("dx from dy's bits, ", shape), gdx_bits.download(), gpu_dx));
    // What the path writes is a bf16 value, as the table's rounding gives.
    std::vector<float> rounded(gpu_y.size());
    cpu().bf16_round(gpu_y.data(), rounded.data(), gpu_y.size());
    EXPECT_TRUE(same_bits(cat("y is bf16, ", shape), rounded, gpu_y));
  }
}

// The passes that read a kept bf16 activation as its bits (kernels/op_table.h: *_bf16_input): on
// CUDA they widen it for the table's pass; against the CPU's, which packs the bits as they are.
TEST_F(GpuTest, Bf16InputPassesMatchTheCpuOnes) {
  ConvDims d;
  d.n = 3, d.h = 12, d.w = 10, d.c_in = 32, d.c_out = 16, d.k = 3, d.stride = 1, d.pad = 1;
  const size_t nx = size_t(d.n) * d.h * d.w * d.c_in, ny = size_t(d.n) * d.out_h() * d.out_w() * d.c_out;
  const size_t nw = size_t(d.k) * d.k * d.c_in * d.c_out;
  const auto x = random_floats(nx, 60), w = random_floats(nw, 61), dy = random_floats(ny, 62);
  std::vector<uint16_t> x16(nx), dy16(ny);
  for (size_t i = 0; i < nx; ++i) x16[i] = f32_to_bf16(x[i]);
  for (size_t i = 0; i < ny; ++i) dy16[i] = f32_to_bf16(dy[i]);
  DeviceBuffer<uint16_t> gx16(x16), gdy16(dy16);
  DeviceBuffer<float> gx(x), gw(w), gdy(dy);
  for (Bf16Operand kept : {Bf16Operand::image, Bf16Operand::output_gradient}) {
    Arena ca = host_arena(conv2d_scratch_floats_bf16_input(Device::cpu, d, kept) * sizeof(float) + 4096);
    Arena ga = device_arena(conv2d_scratch_floats_bf16_input(Device::cuda, d, kept) * sizeof(float) + 4096);
    std::vector<float> out(kept == Bf16Operand::image ? ny : nx), dw(nw, 0.25f);
    DeviceBuffer<float> gout(out.size()), gdw(dw);
    if (kept == Bf16Operand::image) {
      conv2d_forward_bf16_input(Device::cpu, d, x16.data(), w.data(), out.data(), ca);
      conv2d_backward_weights_bf16_input(Device::cpu, d, x16.data(), dy.data(), dw.data(), ca);
      conv2d_forward_bf16_input(Device::cuda, d, gx16.get(), gw.get(), gout.get(), ga);
      conv2d_backward_weights_bf16_input(Device::cuda, d, gx16.get(), gdy.get(), gdw.get(), ga);
    } else {
      conv2d_backward_data_bf16_input(Device::cpu, d, dy16.data(), w.data(), out.data(), ca, false);
      conv2d_backward_weights_bf16_input(Device::cpu, d, x.data(), dy16.data(), dw.data(), ca);
      conv2d_backward_data_bf16_input(Device::cuda, d, gdy16.get(), gw.get(), gout.get(), ga, false);
      conv2d_backward_weights_bf16_input(Device::cuda, d, gx.get(), gdy16.get(), gdw.get(), ga);
    }
    const char* what = kept == Bf16Operand::image ? "image kept: " : "output gradient kept: ";
    EXPECT_TRUE(all_close(cat(what, "y or dx"), gout.download(), out, kRel, kAbs));
    EXPECT_TRUE(all_close(cat(what, "dw"), gdw.download(), dw, 1e-3, 1e-3));
  }
  const int n = 50, in = 64, out = 30;
  const auto lx = random_floats(size_t(n) * in, 63), lw = random_floats(size_t(in) * out, 64);
  const auto ldy = random_floats(size_t(n) * out, 65);
  std::vector<uint16_t> lx16(lx.size());
  for (size_t i = 0; i < lx.size(); ++i) lx16[i] = f32_to_bf16(lx[i]);
  std::vector<float> dx(size_t(n) * in), ldw(size_t(in) * out, 0.0f), db(out, 0.0f);
  // The device's dw and db start from the same zeros (both ops add into them).
  DeviceBuffer<uint16_t> glx16(lx16);
  DeviceBuffer<float> glw(lw), gldy(ldy), gdx(dx.size()), gldw(ldw), gdb(db);
  linear_backward_bf16_input(Device::cpu, lx16.data(), ldy.data(), n, in, out, lw.data(), dx.data(), ldw.data(),
                             db.data());
  linear_backward_bf16_input(Device::cuda, glx16.get(), gldy.get(), n, in, out, glw.get(), gdx.get(), gldw.get(),
                             gdb.get());
  EXPECT_TRUE(all_close("linear from x16: dx", gdx.download(), dx, kRel, kAbs));
  EXPECT_TRUE(all_close("linear from x16: dw", gldw.download(), ldw, 1e-3, 1e-3));
  EXPECT_TRUE(all_close("linear from x16: db", gdb.download(), db, 1e-3, 1e-3));
}

}  // namespace
