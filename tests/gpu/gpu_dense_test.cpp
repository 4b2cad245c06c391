// The CUDA dense ops against the CPU ones, through the op tables: GEMM (every transpose, padded
// leading dimensions, k = 0), the fully connected layer, softmax cross-entropy (with argmax ties)
// and the elementwise ops (exact, in place too); and the CUDA op table itself.
// Tolerances (fp32, |got - want| <= abs + rel*|want|): GEMM-based 1e-4 + 1e-4*|want|;
// softmax loss 1e-5 relative, its gradient 1e-6 + 1e-4*|want|, `correct` exact; elementwise exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gpu_test_util.h"

using namespace mlpd;
using namespace mlpd::gpu_test;

namespace {

TEST_F(GpuTest, CudaTableHoldsEveryOpAndNoneOfTheCpuOnes) {
  const OpTable& g = gpu();
  const OpTable& c = cpu();
  EXPECT_EQ(g.device, Device::cuda);
  EXPECT_EQ(&ops_for(Device::cuda), &g);
#define MLPD_CHECK_OP(name)                                         \
  EXPECT_TRUE(g.name != nullptr) << #name " is missing";            \
  EXPECT_TRUE(g.name != c.name) << #name " is the CPU function";
  MLPD_FOR_EACH_OP(MLPD_CHECK_OP)
#undef MLPD_CHECK_OP
}

// ---- GEMM ----
struct GemmCase {
  bool ta, tb;
  int m, n, k, pad;  // pad: extra floats at the end of every row of A, B and C
  float alpha, beta;
};

std::string gemm_name(const ::testing::TestParamInfo<GemmCase>& info) {
  const GemmCase& c = info.param;
  return cat(c.ta ? "T" : "N", c.tb ? "T" : "N", "_", c.m, "x", c.n, "x", c.k, "_pad", c.pad, "_", info.index);
}

std::vector<GemmCase> gemm_cases() {
  std::vector<GemmCase> v;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      v.push_back({ta, tb, 1, 1, 1, 0, 1.0f, 0.0f});
      v.push_back({ta, tb, 37, 61, 129, 3, 0.5f, 0.25f});
      v.push_back({ta, tb, 128, 96, 256, 0, 1.0f, 1.0f});
      v.push_back({ta, tb, 65, 1000, 2048, 5, 1.0f, 0.0f});
    }
  v.push_back({false, false, 5, 7, 0, 0, 1.0f, 0.5f});  // k = 0: C = beta*C
  v.push_back({true, true, 5, 7, 0, 2, 1.0f, 0.0f});    // k = 0, beta = 0: C = 0
  return v;
}

class GemmGpu : public GpuTestWithParam<GemmCase> {};

TEST_P(GemmGpu, MatchesCpu) {
  const GemmCase c = GetParam();
  const int a_rows = c.ta ? c.k : c.m, a_cols = c.ta ? c.m : c.k;
  const int b_rows = c.tb ? c.n : c.k, b_cols = c.tb ? c.k : c.n;
  const int lda = std::max(1, a_cols + c.pad), ldb = std::max(1, b_cols + c.pad), ldc = c.n + c.pad;
  const auto a = random_floats(std::max<size_t>(1, size_t(a_rows) * lda), 1);
  const auto b = random_floats(std::max<size_t>(1, size_t(b_rows) * ldb), 2);
  const auto c0 = random_floats(size_t(c.m) * ldc, 3);
  std::vector<float> want = c0;
  cpu().gemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), lda, b.data(), ldb, c.beta, want.data(), ldc);
  DeviceBuffer<float> da(a), db(b), dc(c0);
  gpu().gemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, da.get(), lda, db.get(), ldb, c.beta, dc.get(), ldc);
  // The padding columns of C are compared too: both must leave them alone.
  EXPECT_TRUE(all_close("gemm C", dc.download(), want, 1e-4, 1e-4));
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmGpu, ::testing::ValuesIn(gemm_cases()), gemm_name);

// ---- Fully connected ----
struct LinearCase {
  int n, in, out;
  bool bias, with_dx;
};

class LinearGpu : public GpuTestWithParam<LinearCase> {};

TEST_P(LinearGpu, ForwardAndBackwardMatchCpu) {
  const LinearCase c = GetParam();
  const size_t nx = size_t(c.n) * c.in, ny = size_t(c.n) * c.out, nw = size_t(c.in) * c.out;
  const auto x = random_floats(nx, 10), w = random_floats(nw, 11), b = random_floats(c.out, 12);
  const auto dy = random_floats(ny, 13);
  const auto dw0 = random_floats(nw, 14), db0 = random_floats(c.out, 15);  // gradients accumulate onto these
  DeviceBuffer<float> gx(x), gw(w), gb(b), gdy(dy), gdw(dw0), gdb(db0);
  const float* bias_cpu = c.bias ? b.data() : nullptr;
  const float* bias_gpu = c.bias ? gb.get() : nullptr;

  std::vector<float> y(ny);
  cpu().linear_forward(x.data(), c.n, c.in, c.out, w.data(), bias_cpu, y.data());
  DeviceBuffer<float> gy(std::vector<float>(ny, 777.0f));  // overwritten
  gpu().linear_forward(gx.get(), c.n, c.in, c.out, gw.get(), bias_gpu, gy.get());
  EXPECT_TRUE(all_close("linear y", gy.download(), y, 1e-4, 1e-4));

  std::vector<float> dx(nx, 0.0f), dw = dw0, db = db0;
  cpu().linear_backward(x.data(), dy.data(), c.n, c.in, c.out, w.data(), c.with_dx ? dx.data() : nullptr,
                        dw.data(), c.bias ? db.data() : nullptr);
  DeviceBuffer<float> gdx(std::vector<float>(nx, 777.0f));  // overwritten
  gpu().linear_backward(gx.get(), gdy.get(), c.n, c.in, c.out, gw.get(), c.with_dx ? gdx.get() : nullptr,
                        gdw.get(), c.bias ? gdb.get() : nullptr);
  if (c.with_dx) {
    EXPECT_TRUE(all_close("linear dx", gdx.download(), dx, 1e-4, 1e-4));
  }
  EXPECT_TRUE(all_close("linear dw", gdw.download(), dw, 1e-4, 1e-4));
  EXPECT_TRUE(all_close("linear db", gdb.download(), db, 1e-4, 1e-4));  // untouched where no bias
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearGpu,
                         ::testing::Values(LinearCase{1, 1, 1, true, true}, LinearCase{37, 129, 10, true, true},
                                           LinearCase{33, 2048, 1000, true, false},
                                           LinearCase{128, 64, 10, false, true},
                                           LinearCase{1001, 256, 128, true, true}),
                         [](const ::testing::TestParamInfo<LinearCase>& i) {
                           const LinearCase& c = i.param;
                           return cat("n", c.n, "_", c.in, "to", c.out, c.bias ? "_bias" : "", c.with_dx ? "_dx" : "");
                         });

// ---- Softmax cross-entropy ----
struct XentCase {
  int n, classes;
  float label_smoothing;
};

class XentGpu : public GpuTestWithParam<XentCase> {};

TEST_P(XentGpu, LossGradientAndCorrectMatchCpu) {
  const XentCase c = GetParam();
  const size_t nz = size_t(c.n) * c.classes;
  const auto z = random_floats(nz, 20, -4.0f, 4.0f);
  const auto labels = random_indices(c.n, 21, c.classes);
  const float scale = 0.5f;
  std::vector<float> dz(nz);
  int correct = -1;
  double loss = 0.0;
  cpu().softmax_xent(z.data(), labels.data(), c.n, c.classes, c.label_smoothing, scale, dz.data(), &loss,
                     &correct);
  DeviceBuffer<float> gz(z), gdz(std::vector<float>(nz, 777.0f));
  DeviceBuffer<int32_t> glabels(labels);
  int gcorrect = -1;
  DeviceLossSum gsum;
  gpu().softmax_xent(gz.get(), glabels.get(), c.n, c.classes, c.label_smoothing, scale, gdz.get(), gsum.get(),
                     &gcorrect);
  const double gloss = gsum.read();
  EXPECT_TRUE(scalar_close("softmax_xent loss", gloss, loss, 1e-5, 1e-5));
  EXPECT_TRUE(all_close("softmax_xent dlogits", gdz.download(), dz, 1e-4, 1e-6));
  EXPECT_EQ(gcorrect, correct);
  // Both outputs are nullable; the loss does not depend on them.
  gsum.zero();
  gpu().softmax_xent(gz.get(), glabels.get(), c.n, c.classes, c.label_smoothing, scale, nullptr, gsum.get(),
                     nullptr);
  const double bare = gsum.read();
  EXPECT_TRUE(scalar_close("softmax_xent loss without outputs", bare, loss, 1e-5, 1e-5));
  // In place (gnmt and transformer write the gradient over their logits): the same bits.
  DeviceBuffer<float> in_place(z);
  int in_place_correct = -1;
  gsum.zero();
  gpu().softmax_xent(in_place.get(), glabels.get(), c.n, c.classes, c.label_smoothing, scale, in_place.get(),
                     gsum.get(), &in_place_correct);
  const double in_place_loss = gsum.read();
  EXPECT_TRUE(same_bits("softmax_xent loss in place", std::vector<double>{in_place_loss}, std::vector<double>{gloss}));
  EXPECT_TRUE(same_bits("softmax_xent dlogits in place", in_place.download(), gdz.download()));
  EXPECT_EQ(in_place_correct, gcorrect);
}

TEST_P(XentGpu, TwoRunsGiveTheSameBits) {
  const XentCase c = GetParam();
  const size_t nz = size_t(c.n) * c.classes;
  DeviceBuffer<float> gz(random_floats(nz, 22, -4.0f, 4.0f)), d1(nz), d2(nz);
  DeviceBuffer<int32_t> glabels(random_indices(c.n, 23, c.classes));
  int c1 = -1, c2 = -2;
  DeviceLossSum s1, s2;  // zeroed on allocation
  gpu().softmax_xent(gz.get(), glabels.get(), c.n, c.classes, c.label_smoothing, 1.0f / c.n, d1.get(), s1.get(),
                     &c1);
  gpu().softmax_xent(gz.get(), glabels.get(), c.n, c.classes, c.label_smoothing, 1.0f / c.n, d2.get(), s2.get(),
                     &c2);
  const double l1 = s1.read(), l2 = s2.read();
  EXPECT_TRUE(same_bits("softmax_xent loss", std::vector<double>{l1}, std::vector<double>{l2}));
  EXPECT_TRUE(same_bits("softmax_xent dlogits", d1.download(), d2.download()));
  EXPECT_EQ(c1, c2);
}

INSTANTIATE_TEST_SUITE_P(Shapes, XentGpu,
                         ::testing::Values(XentCase{1, 2, 0.0f}, XentCase{37, 10, 0.1f}, XentCase{130, 1000, 0.1f},
                                           XentCase{64, 1000, 0.0f}, XentCase{33, 4097, 0.1f}),
                         [](const ::testing::TestParamInfo<XentCase>& i) {
                           const XentCase& c = i.param;
                           return cat("n", c.n, "_classes", c.classes, c.label_smoothing > 0 ? "_smoothed" : "");
                         });

TEST_F(GpuTest, XentArgmaxIsTheFirstMaximum) {
  // Hand-checked rows of 5 classes: (logits, label, counted as correct?).
  const std::vector<std::vector<float>> rows = {{1, 1, 1, 1, 1}, {1, 1, 1, 1, 1},     {0, 3, 1, 3, 2},
                                                {0, 3, 1, 3, 2}, {-1, -2, -3, -4, -0.5f}, {2, 1, 0, 0, 2}};
  const std::vector<int32_t> row_labels = {0, 2, 1, 3, 4, 4};  // correct: yes, no, yes, no, yes, no
  const int repeats = 13, classes = 5, n = int(rows.size()) * repeats;  // 78 rows: more than a warp
  std::vector<float> z;
  std::vector<int32_t> labels;
  for (int r = 0; r < repeats; ++r)
    for (size_t i = 0; i < rows.size(); ++i) {
      z.insert(z.end(), rows[i].begin(), rows[i].end());
      labels.push_back(row_labels[i]);
    }
  int correct = -1, gcorrect = -1;
  cpu().softmax_xent(z.data(), labels.data(), n, classes, 0.0f, 1.0f, nullptr, nullptr, &correct);
  DeviceBuffer<float> gz(z);
  DeviceBuffer<int32_t> glabels(labels);
  gpu().softmax_xent(gz.get(), glabels.get(), n, classes, 0.0f, 1.0f, nullptr, nullptr, &gcorrect);
  EXPECT_EQ(correct, 3 * repeats);
  EXPECT_EQ(gcorrect, 3 * repeats);
}

// ---- Elementwise (exact: one rounding or none per element, on both devices) ----
class ElementwiseGpu : public GpuTestWithParam<size_t> {};

// Random values with exact zeros at every 7th element.
std::vector<float> with_zeros(size_t n, uint64_t stream) {
  auto v = random_floats(n, stream);
  for (size_t i = 0; i < n; i += 7) v[i] = 0.0f;
  return v;
}

TEST_P(ElementwiseGpu, ReluForwardAndBackwardAreExact) {
  const size_t n = GetParam();
  const auto x = with_zeros(n, 30), dy = random_floats(n, 31);
  std::vector<float> y(n), dx(n);
  cpu().relu_forward(x.data(), y.data(), n);
  cpu().relu_backward(y.data(), dy.data(), dx.data(), n);

  DeviceBuffer<float> gx(x), gy(n), gdy(dy), gdx(n);
  gpu().relu_forward(gx.get(), gy.get(), n);
  EXPECT_TRUE(all_equal("relu_forward y", gy.download(), y));
  gpu().relu_forward(gx.get(), gx.get(), n);  // in place
  EXPECT_TRUE(all_equal("relu_forward in place", gx.download(), y));
  gpu().relu_backward(gy.get(), gdy.get(), gdx.get(), n);
  EXPECT_TRUE(all_equal("relu_backward dx", gdx.download(), dx));
  gpu().relu_backward(gy.get(), gdy.get(), gdy.get(), n);  // dx aliases dy
  EXPECT_TRUE(all_equal("relu_backward in place", gdy.download(), dx));
}

TEST_P(ElementwiseGpu, AddAndAddReluAreExact) {
  const size_t n = GetParam();
  const auto a = with_zeros(n, 32);
  auto b = random_floats(n, 33);
  for (size_t i = 0; i < n; i += 11) b[i] = -a[i];  // sums of exactly zero
  std::vector<float> sum(n), sum_relu(n);
  cpu().add_forward(a.data(), b.data(), sum.data(), n);
  cpu().add_relu_forward(a.data(), b.data(), sum_relu.data(), n);

  DeviceBuffer<float> ga(a), gb(b), gy(n);
  gpu().add_forward(ga.get(), gb.get(), gy.get(), n);
  EXPECT_TRUE(all_equal("add_forward y", gy.download(), sum));
  gpu().add_relu_forward(ga.get(), gb.get(), gy.get(), n);
  EXPECT_TRUE(all_equal("add_relu_forward y", gy.download(), sum_relu));
  gpu().add_relu_forward(ga.get(), gb.get(), gb.get(), n);  // y aliases b
  EXPECT_TRUE(all_equal("add_relu_forward in place", gb.download(), sum_relu));
  DeviceBuffer<float> gb2(b);
  gpu().add_forward(ga.get(), gb2.get(), ga.get(), n);  // y aliases a
  EXPECT_TRUE(all_equal("add_forward in place", ga.download(), sum));
}

INSTANTIATE_TEST_SUITE_P(Sizes, ElementwiseGpu, ::testing::Values(size_t(1), size_t(1000), size_t(1000003)));

}  // namespace
