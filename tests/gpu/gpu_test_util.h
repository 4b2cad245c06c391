// What the CUDA op tests share: each CUDA op is run through cuda_ops() and compared with its CPU
// op (cpu_ops()) on the same random inputs, so the tests also check the op table. On a machine
// without a GPU every test skips itself ("no GPU") in the fixture's SetUp and nothing else runs.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/rng.h"
#include "kernels/device.h"
#include "kernels/op_table.h"

namespace mlpd::gpu_test {

// The fixture of every GPU test: skips where no GPU is visible, else opens GPU 0 once per process.
template <typename Base = ::testing::Test>
class GpuFixture : public Base {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
    static const DeviceContext ctx = open_device(Device::cuda, 0);
    ASSERT_EQ(ctx.device, Device::cuda);
  }
  static const OpTable& cpu() { return cpu_ops(); }
  static const OpTable& gpu() { return cuda_ops(); }
};
using GpuTest = GpuFixture<>;
template <typename P>
using GpuTestWithParam = GpuFixture<::testing::TestWithParam<P>>;

// ---- inputs ----
// Uniform in [lo, hi), a function of (stream, index) only.
inline std::vector<float> random_floats(size_t n, uint64_t stream, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = lo + (hi - lo) * rng_uniform(2024, stream, i);
  return v;
}
// Multiples of `step` in [-levels*step, levels*step]: many exact ties, and sums that stay exact.
inline std::vector<float> random_levels(size_t n, uint64_t stream, int levels, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = step * float(int64_t(rng_below(2024, stream, i, uint64_t(2 * levels + 1))) - levels);
  return v;
}
// Uniform in [0, bound).
inline std::vector<int32_t> random_indices(size_t n, uint64_t stream, int32_t bound) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = int32_t(rng_below(2024, stream, i, uint64_t(bound)));
  return v;
}

// ---- device memory ----
// A typed device buffer (zeroed on allocation), freed when it goes out of scope.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : bytes_(alloc_on(Device::cuda, count * sizeof(T))), count_(count) {}
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  T* get() const { return as<T>(bytes_); }
  size_t size() const { return count_; }
  void upload(const std::vector<T>& host) {
    EXPECT_EQ(host.size(), count_) << "upload of a host vector of another size";
    copy_to_device(Device::cuda, get(), host.data(), std::min(host.size(), count_) * sizeof(T));
  }
  // Waits for the queued work.
  std::vector<T> download() const {
    std::vector<T> host(count_);
    copy_to_host(Device::cuda, host.data(), get(), count_ * sizeof(T));
    return host;
  }

 private:
  DeviceBytes bytes_;
  size_t count_;
};

// Where a CUDA loss op adds its sum (kernels/op_signatures.inc: loss ops ADD to doubles of the op's
// memory): `count` device doubles (1, or 2 for the ops with two parts), zeroed on allocation and by
// zero() (queued behind the compute already issued). read() and parts() wait for the queued work.
class DeviceLossSum {
 public:
  explicit DeviceLossSum(size_t count = 1) : buf_(count) {}
  double* get() const { return buf_.get(); }
  void zero() { zero_on(Device::cuda, buf_.get(), buf_.size() * sizeof(double)); }
  double read() const { return buf_.download()[0]; }
  std::vector<double> parts() const { return buf_.download(); }

 private:
  DeviceBuffer<double> buf_;
};

inline Arena device_arena(size_t bytes) {
  Arena a;
  arena_init_on(Device::cuda, a, bytes);
  return a;
}
inline Arena host_arena(size_t bytes) {
  Arena a;
  arena_init(a, bytes);
  return a;
}

// Concatenates its arguments as text (test names; avoids GCC 12's -Wrestrict false positive on
// chains of std::string operator+).
template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

// ---- comparisons ----
// |got - want| <= abs + rel*|want| for every element (NaN matches only NaN). The message names
// the number of misses and the worst one (largest error over its tolerance).
inline ::testing::AssertionResult all_close(const std::string& what, const std::vector<float>& got,
                                            const std::vector<float>& want, double rel, double abs) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << what << ": " << got.size() << " values, expected " << want.size();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  size_t misses = 0, worst = 0;
  double worst_ratio = -1.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    const double tol = abs + rel * std::fabs(w);
    double ratio;
    if (std::isnan(g) || std::isnan(w)) {
      ratio = std::isnan(g) && std::isnan(w) ? 0.0 : kInf;
    } else {
      const double d = std::fabs(g - w);
      ratio = d <= tol ? 0.0 : (tol > 0.0 ? d / tol : kInf);
    }
    if (ratio > 0.0) ++misses;
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  if (misses == 0) return ::testing::AssertionSuccess();
  std::ostringstream os;
  os.precision(9);
  os << what << ": " << misses << " of " << got.size() << " values off by more than " << abs << " + " << rel
     << "*|want|; worst at [" << worst << "]: got " << got[worst] << ", want " << want[worst] << " (|diff| "
     << std::fabs(double(got[worst]) - double(want[worst])) << ")";
  return ::testing::AssertionFailure() << os.str();
}

// Exact values (tolerance 0; +0 equals -0).
inline ::testing::AssertionResult all_equal(const std::string& what, const std::vector<float>& got,
                                            const std::vector<float>& want) {
  return all_close(what, got, want, 0.0, 0.0);
}

// Identical bits: the determinism checks (the same op twice on the same inputs).
template <typename T>
::testing::AssertionResult same_bits(const std::string& what, const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size())
    return ::testing::AssertionFailure() << what << ": " << a.size() << " vs " << b.size() << " values";
  size_t differ = 0, first = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0 && differ++ == 0) first = i;
  if (differ == 0) return ::testing::AssertionSuccess();
  std::ostringstream os;
  os.precision(9);
  os << what << ": " << differ << " of " << a.size() << " values differ in their bits between two runs; first at ["
     << first << "]: " << a[first] << " vs " << b[first];
  return ::testing::AssertionFailure() << os.str();
}

// One scalar: |got - want| <= abs + rel*|want|.
inline ::testing::AssertionResult scalar_close(const std::string& what, double got, double want, double rel, double abs) {
  const double tol = abs + rel * std::fabs(want);
  if (std::fabs(got - want) <= tol) return ::testing::AssertionSuccess();
  std::ostringstream os;
  os.precision(17);
  os << what << ": got " << got << ", want " << want << " (|diff| " << std::fabs(got - want) << " > " << tol << ")";
  return ::testing::AssertionFailure() << os.str();
}

}  // namespace mlpd::gpu_test
