// gemm_bf16 on the CPU, on each path this build has (kernels/cpu/gemm_bf16.h): exact where exact
// arithmetic allows (small integers: every product and sum is exact in fp32, so any order gives the
// same bits, and an indexing or packing slip shows), and within the bound of fp32 summation on
// random values. Also bf16_pack_rows and bias_grad, the other ops the bf16 table is built from.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "grad_check.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/op_table.h"

using namespace mlpd;
using namespace mlpd::test;

namespace {

// Sets the path for one scope and restores the default.
struct GemmBf16Path {
  explicit GemmBf16Path(bool native) { gemm_bf16_set_native_enabled(native); }
  ~GemmBf16Path() { gemm_bf16_set_native_enabled(true); }
  GemmBf16Path(const GemmBf16Path&) = delete;
  GemmBf16Path& operator=(const GemmBf16Path&) = delete;
};

std::vector<bool> paths() {
  std::vector<bool> p = {false};
  if (gemm_bf16_native_available()) p.push_back(true);
  return p;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_bf16(v[i]);
  return h;
}

std::vector<float> small_integers(size_t n, uint64_t stream) {
  std::vector<float> v = random_vec(n, stream, -4.49f, 4.49f);
  for (float& x : v) x = std::round(x);
  return v;
}

struct Case {
  bool ta, tb;
  int m, n, k, pad;
  float alpha, beta;
};

std::string name(const Case& c) {
  std::ostringstream s;
  s << (c.ta ? "T" : "N") << (c.tb ? "T" : "N") << " m" << c.m << " n" << c.n << " k" << c.k << " beta " << c.beta;
  return s.str();
}

// Sizes that cross every block edge of the native kernel (14-row and 32-column tiles, 168-row A
// blocks, 384-deep k blocks), odd k, padded leading dimensions and all four transposes.
const Case kCases[] = {
    {false, false, 1, 1, 1, 0, 1.0f, 0.0f},      {false, false, 13, 31, 7, 0, 1.0f, 0.0f},
    {false, false, 15, 33, 8, 3, 0.5f, 1.0f},    {true, false, 29, 65, 40, 1, 1.0f, 0.25f},
    {false, true, 43, 17, 385, 2, 2.0f, 0.0f},   {true, true, 14, 32, 384, 0, 1.0f, 1.0f},
    {false, false, 200, 70, 801, 5, 0.5f, 0.5f}, {true, true, 170, 97, 769, 0, 1.0f, 0.0f},
    {false, true, 337, 48, 130, 4, 1.0f, 1.0f},  {true, false, 3, 300, 2, 0, -1.0f, 0.0f},
};

// C = alpha op(A) op(B) + beta C in double, and the bound of fp32 summation for each element:
// k sums of terms at most sum |a||b| (+ |beta c|), each rounding at most 2^-24 relative.
void reference(const Case& c, const std::vector<float>& a, int lda, const std::vector<float>& b, int ldb,
               const std::vector<float>& c0, int ldc, std::vector<double>& want, std::vector<double>& bound) {
  want.assign(c0.size(), 0.0);
  bound.assign(c0.size(), 0.0);
  for (int i = 0; i < c.m; ++i)
    for (int j = 0; j < c.n; ++j) {
      double s = 0, mag = 0;
      for (int p = 0; p < c.k; ++p) {
        const double av = c.ta ? a[size_t(p) * lda + i] : a[size_t(i) * lda + p];
        const double bv = c.tb ? b[size_t(j) * ldb + p] : b[size_t(p) * ldb + j];
        s += av * bv;
        mag += std::fabs(av * bv);
      }
      const size_t at = size_t(i) * ldc + j;
      const double old = c.beta == 0.0f ? 0.0 : double(c.beta) * c0[at];
      want[at] = double(c.alpha) * s + old;
      bound[at] = (double(c.k) + 2) * std::ldexp(1.0, -24) * (std::fabs(c.alpha) * mag + std::fabs(old));
    }
}

void check_case(const Case& c, bool native, bool integers) {
  SCOPED_TRACE(name(c));
  SCOPED_TRACE(native ? "native" : "widen");
  SCOPED_TRACE(integers ? "integers" : "random");
  const int a_rows = c.ta ? c.k : c.m, a_cols = c.ta ? c.m : c.k;
  const int b_rows = c.tb ? c.n : c.k, b_cols = c.tb ? c.k : c.n;
  const int lda = a_cols + c.pad, ldb = b_cols + c.pad, ldc = c.n + c.pad;
  const size_t na = size_t(a_rows) * lda, nb = size_t(b_rows) * ldb, nc = size_t(c.m) * ldc;
  std::vector<float> a = integers ? small_integers(na, 1) : random_vec(na, 1);
  std::vector<float> b = integers ? small_integers(nb, 2) : random_vec(nb, 2);
  std::vector<float> c0 = integers ? small_integers(nc, 3) : random_vec(nc, 3);
  for (float& x : a) x = round_to_bf16(x);  // the operands' values, exactly
  for (float& x : b) x = round_to_bf16(x);
  const float sentinel = 1234.5f;  // the padding of C: never written
  for (int i = 0; i < c.m; ++i)
    for (int j = c.n; j < ldc; ++j) c0[size_t(i) * ldc + j] = sentinel;
  if (c.beta == 0.0f) c0[0] = std::numeric_limits<float>::quiet_NaN();  // beta 0 never reads C

  std::vector<double> want, bound;
  reference(c, a, lda, b, ldb, c0, ldc, want, bound);
  const std::vector<uint16_t> a16 = to_bf16(a), b16 = to_bf16(b);
  std::vector<float> got = c0;
  GemmBf16Path path(native);
  cpu_ops().gemm_bf16(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a16.data(), lda, b16.data(), ldb, c.beta, got.data(), ldc);

  size_t bad = 0;
  for (int i = 0; i < c.m; ++i) {
    for (int j = 0; j < ldc; ++j) {
      const size_t at = size_t(i) * ldc + j;
      if (j >= c.n) {
        bad += got[at] == sentinel ? 0 : 1;
        continue;
      }
      const bool ok = integers ? double(got[at]) == want[at] : std::fabs(got[at] - want[at]) <= bound[at];
      if (!ok && bad++ < 3) ADD_FAILURE() << "C[" << i << "," << j << "] = " << got[at] << ", want " << want[at];
    }
  }
  EXPECT_EQ(bad, 0u);
}

TEST(GemmBf16, ExactOnSmallIntegersOnEveryPath) {
  for (bool native : paths())
    for (const Case& c : kCases) check_case(c, native, true);
}

TEST(GemmBf16, WithinFp32SummationBoundOnRandomValues) {
  for (bool native : paths())
    for (const Case& c : kCases) check_case(c, native, false);
}

TEST(GemmBf16, WidenPathIsOpenBlasOnTheWidenedOperands) {
  const Case c{true, false, 37, 41, 53, 2, 0.75f, 1.0f};
  const int lda = c.m + c.pad, ldb = c.n + c.pad, ldc = c.n + c.pad;
  std::vector<float> a = random_vec(size_t(c.k) * lda, 4), b = random_vec(size_t(c.k) * ldb, 5);
  for (float& x : a) x = round_to_bf16(x);
  for (float& x : b) x = round_to_bf16(x);
  const std::vector<float> c0 = random_vec(size_t(c.m) * ldc, 6);
  std::vector<float> got = c0, want = c0;
  const std::vector<uint16_t> a16 = to_bf16(a), b16 = to_bf16(b);
  GemmBf16Path path(false);
  EXPECT_STREQ(gemm_bf16_path_name(), "widen+openblas");
  cpu_ops().gemm_bf16(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a16.data(), lda, b16.data(), ldb, c.beta, got.data(), ldc);
  cpu_ops().gemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), lda, b.data(), ldb, c.beta, want.data(), ldc);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
}

TEST(GemmBf16, EmptyProductScalesC) {
  for (bool native : paths()) {
    GemmBf16Path path(native);
    std::vector<float> c = {1.0f, std::numeric_limits<float>::quiet_NaN(), 3.0f, 4.0f};
    cpu_ops().gemm_bf16(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 1, 0.0f, c.data(), 2);
    EXPECT_EQ(c, std::vector<float>(4, 0.0f));
    c = {1.0f, 2.0f, 3.0f, 4.0f};
    cpu_ops().gemm_bf16(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 1, 0.5f, c.data(), 2);
    EXPECT_EQ(c, (std::vector<float>{0.5f, 1.0f, 1.5f, 2.0f}));
  }
}

TEST(GemmBf16, PathNameSaysWhichKernelRuns) {
  GemmBf16Path path(true);
  EXPECT_STREQ(gemm_bf16_path_name(), gemm_bf16_native_available() ? "avx512bf16" : "widen+openblas");
  std::printf("gemm_bf16 native kernel in this build: %s\n", gemm_bf16_native_available() ? "yes" : "no");
}

TEST(Bf16Pack, StoresTheRoundedBitsAndLeavesTheGaps) {
  const int rows = 4, width = 9, ld_x = 10, ld_y = 13;
  std::vector<float> x = random_vec(size_t(rows) * ld_x, 7, -100.0f, 100.0f);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[4] = 1.0f + std::ldexp(1.0f, -8);  // a tie, to even: 1
  std::vector<uint16_t> y(size_t(rows) * ld_y, 0xabcd), want = y;
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < width; ++j) want[size_t(r) * ld_y + j] = f32_to_bf16(x[size_t(r) * ld_x + j]);
  cpu_ops().bf16_pack_rows(x.data(), rows, width, ld_x, y.data(), ld_y);
  EXPECT_EQ(y, want);
  EXPECT_EQ(y[4], f32_to_bf16(1.0f));
  EXPECT_TRUE(std::isnan(bf16_to_f32(y[3])));
}

TEST(Bf16Unpack, WidensEveryBitPatternExactlyAndLeavesTheGaps) {
  // All 65536 bf16 bit patterns, as 256 rows of 256 inside wider rows on both sides.
  const int rows = 256, width = 256, ld_x = 259, ld_y = 261;
  std::vector<uint16_t> x(size_t(rows) * ld_x, 0);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < width; ++j) x[size_t(r) * ld_x + j] = static_cast<uint16_t>(r * width + j);
  std::vector<float> y(size_t(rows) * ld_y, 7.0f);
  cpu_ops().bf16_unpack_rows(x.data(), rows, width, ld_x, y.data(), ld_y);
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < ld_y; ++j) {
      const float got = y[size_t(r) * ld_y + j];
      const uint32_t want = j < width ? uint32_t(r * width + j) << 16 : f32_bits(7.0f);
      ASSERT_EQ(f32_bits(got), want) << "row " << r << " col " << j;
    }
  }
  // Packing what was unpacked gives every non-NaN pattern back (packing quiets a NaN).
  std::vector<uint16_t> again(x.size(), 0);
  cpu_ops().bf16_pack_rows(y.data(), rows, width, ld_y, again.data(), ld_x);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < width; ++j) {
      const uint16_t h = x[size_t(r) * ld_x + j];
      const bool nan = (h & 0x7fffu) > 0x7f80u;
      if (!nan) {
        ASSERT_EQ(again[size_t(r) * ld_x + j], h) << "pattern " << h;
      }
    }
}

// The ReLU mask read off bf16 bits is relu_backward's on the widened values, for every pattern
// (zeros of both signs, subnormals, infinities, NaNs), in place too.
TEST(Bf16ReluBackward, MasksAsReluBackwardDoesOnTheWidenedValues) {
  const size_t n = 65536;
  std::vector<uint16_t> y16(n);
  std::vector<float> widened(n), dy(n);
  for (size_t i = 0; i < n; ++i) {
    y16[i] = static_cast<uint16_t>(i);
    widened[i] = bf16_to_f32(y16[i]);
    dy[i] = 0.25f + float(i % 97);
  }
  std::vector<float> want(n), got(n, 7.0f);
  cpu_ops().relu_backward(widened.data(), dy.data(), want.data(), n);
  cpu_ops().relu_backward_bf16(y16.data(), dy.data(), got.data(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(f32_bits(got[i]), f32_bits(want[i])) << "pattern " << i;
  EXPECT_EQ(got[0x3f80], dy[0x3f80]);  // 1.0 passes
  EXPECT_EQ(got[0x7f80], dy[0x7f80]);  // +inf passes
  for (uint16_t blocked : {0x0000, 0x8000, 0xbf80, 0x7fc0, 0xff80}) EXPECT_EQ(got[blocked], 0.0f) << blocked;
  cpu_ops().relu_backward_bf16(y16.data(), dy.data(), dy.data(), n);  // dx aliases dy
  EXPECT_EQ(dy, got);
}

TEST(BiasGrad, AddsTheColumnSums) {
  const int n = 7, out = 5;
  const std::vector<float> dy = small_integers(size_t(n) * out, 8);
  std::vector<float> db(out, 1.0f), want(out, 1.0f);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < out; ++j) want[j] += dy[size_t(i) * out + j];
  cpu_ops().bias_grad(dy.data(), n, out, db.data());
  EXPECT_EQ(db, want);
}

}  // namespace
