// comm-bench's harness (comm/bench/harness.h), called directly under mpirun at 1..4 ranks: every
// collective and every host path over a small size range comes out right (#wrong 0) and takes
// time; a result corrupted on purpose is counted wrong (the control); bad options are usage
// errors (exit code 2) on every rank alike.
#include <gtest/gtest.h>

#include <string>

#include "comm/bench/harness.h"
#include "core/check.h"
#include "kernels/device.h"
#include "test_world.h"

using namespace mlpd;
using comm_bench::Options;
using comm_bench::Report;
using comm_bench::run_comm_bench;

namespace {

// 1K, 8K, 64K: three sizes, small enough for four ranks on two cores.
Options small_sweep(const std::string& op) {
  Options o;
  o.op = op;
  o.min_bytes = "1K";
  o.max_bytes = "64K";
  o.factor = 8;
  o.iters = 3;
  o.warmup = 1;
  return o;
}

void expect_right_and_timed(const Report& r) {
  ASSERT_EQ(r.sizes.size(), 3u);
  EXPECT_EQ(r.total_wrong, 0);
  for (const auto& s : r.sizes) {
    EXPECT_EQ(s.wrong, 0) << s.bytes << " bytes";
    EXPECT_GT(s.time_us, 0) << s.bytes << " bytes";
    EXPECT_EQ(s.count * 4, s.bytes);
  }
}

// Every rank must throw the same usage error, before any collective (else this test would hang).
void expect_usage_error(const Options& o, const std::string& message_part) {
  try {
    run_comm_bench(test_world(), o);
    ADD_FAILURE() << "accepted; expected an error saying '" << message_part << "'";
  } catch (const UserError& e) {
    EXPECT_EQ(e.exit_code, 2) << e.what();
    EXPECT_NE(std::string(e.what()).find(message_part), std::string::npos) << e.what();
  }
}

class EveryCollective : public ::testing::TestWithParam<const char*> {};

}  // namespace

TEST_P(EveryCollective, EverySizeIsRightAndTakesTime) {
  expect_right_and_timed(run_comm_bench(test_world(), small_sweep(GetParam())));
}

TEST_P(EveryCollective, CorruptedResultIsCountedWrong) {
  Options o = small_sweep(GetParam());
  o.corrupt_for_test = true;
  const Report r = run_comm_bench(test_world(), o);
  ASSERT_EQ(r.sizes.size(), 3u);
  for (const auto& s : r.sizes) EXPECT_EQ(s.wrong, 1) << s.bytes << " bytes: rank 0 altered exactly one element";
  EXPECT_EQ(r.total_wrong, 3);
}

INSTANTIATE_TEST_SUITE_P(CommBenchHarness, EveryCollective,
                         ::testing::Values("allreduce", "broadcast", "reduce_scatter", "allgather"),
                         [](const auto& info) { return std::string(info.param); });

TEST(CommBenchHarness, TrainersBucketedPathWithOverlapIsRight) {
  Options o = small_sweep("allreduce");
  o.max_bytes = "1M";  // 1K, 32K, 1M: at 1M four 256 KiB gradient views in several buckets
  o.factor = 32;
  o.bucketed = true;
  o.bucket_mb = 0.5;
  o.overlap = true;
  o.precision = "bf16";
  const Report r = run_comm_bench(test_world(), o);
  expect_right_and_timed(r);
  for (const auto& s : r.sizes) EXPECT_GE(s.overlap_pct, 0) << "overlap measured at " << s.bytes << " bytes";
}

TEST(CommBenchHarness, HierarchicalBackendIsRight) {
  Options o = small_sweep("allreduce");
  o.backend = "hierarchical";
  expect_right_and_timed(run_comm_bench(test_world(), o));
}

TEST(CommBenchHarness, SideBySideTimesBothPathsAndCatchesCorruption) {
  Options o = small_sweep("allreduce");
  o.side_by_side = true;
  const Report r = run_comm_bench(test_world(), o);
  expect_right_and_timed(r);
  for (const auto& s : r.sizes) EXPECT_GT(s.plain_time_us, 0);
  o.corrupt_for_test = true;
  EXPECT_EQ(run_comm_bench(test_world(), o).total_wrong, 2 * 3) << "one element of each path at each size";
}

TEST(CommBenchHarness, BadOptionsAreUsageErrors) {
  auto with = [](auto change) {
    Options o = small_sweep("allreduce");
    change(o);
    return o;
  };
  expect_usage_error(with([](Options& o) { o.min_bytes = "abc"; }), "bad size 'abc'");
  expect_usage_error(with([](Options& o) { o.max_bytes = "1Q"; }), "bad size suffix");
  expect_usage_error(with([](Options& o) { o.min_bytes = ""; }), "empty size");
  expect_usage_error(with([](Options& o) { o.min_bytes = "-8"; }), "negative size");
  expect_usage_error(with([](Options& o) { o.min_bytes = "0"; }), "need 0 < min bytes <= max bytes");
  expect_usage_error(with([](Options& o) { o.min_bytes = "1M"; }), "need 0 < min bytes <= max bytes");
  expect_usage_error(with([](Options& o) { o.factor = 1; }), "--stepfactor must be > 1");
  expect_usage_error(with([](Options& o) { o.factor = 0.5; }), "--stepfactor must be > 1");
  expect_usage_error(with([](Options& o) { o.factor = 1.0000001; }), "sizes from 1K to 64K; at most 100000");
  expect_usage_error(with([](Options& o) { o.iters = 0; }), "--iters must be 1 to 1000000");
  expect_usage_error(with([](Options& o) { o.warmup = -1; }), "--warmup_iters must be 0 to 1000000");
  expect_usage_error(with([](Options& o) { o.op = "alltoall"; }),
                     "unknown --op 'alltoall' (expected allreduce, broadcast, reduce_scatter, allgather)");
  expect_usage_error(with([](Options& o) { o.backend = "tcp"; }), "unknown --backend 'tcp'");
  expect_usage_error(with([](Options& o) { o.precision = "fp8"; }), "unknown communication precision 'fp8'");
  expect_usage_error(with([](Options& o) { o.comm_timeout = 0; }), "--comm-timeout must be > 0");
  expect_usage_error(with([](Options& o) { o.bucket_mb = -1; }), "must be >= 0");
  expect_usage_error(with([](Options& o) { o.op = "broadcast", o.bucketed = true; }), "allreduce only");
  expect_usage_error(with([](Options& o) { o.op = "allgather", o.side_by_side = true; }),
                     "--side-by-side runs allreduce only");
  // 1 TiB: more than half of any test machine's memory, refused before anything is allocated.
  expect_usage_error(with([](Options& o) { o.max_bytes = "1024G"; }), "more than half of its");
  expect_usage_error(with([](Options& o) { o.device = "tpu"; }), "--device: 'tpu' is not a device (cpu or cuda)");
  // On the GPU: NCCL's paths only, fp32, no host compute kernel (refused whether or not a GPU is here).
  expect_usage_error(with([](Options& o) { o.device = "cuda", o.backend = "hierarchical"; }),
                     "--device cuda: --backend hierarchical reduces host buffers");
  expect_usage_error(with([](Options& o) { o.device = "cuda", o.side_by_side = true; }),
                     "--device cuda: --side-by-side compares host paths");
  expect_usage_error(with([](Options& o) { o.device = "cuda", o.overlap = true; }),
                     "--device cuda: --overlap measures a host compute kernel");
  expect_usage_error(with([](Options& o) { o.device = "cuda", o.bucketed = true, o.precision = "bf16"; }),
                     "--device cuda: NCCL reduces fp32 only");
#ifdef MLPD_HAVE_NCCL
  if (cuda_device_count() == 0) {
    expect_usage_error(with([](Options& o) { o.backend = "nccl"; }), "--backend nccl: no GPU visible");
    expect_usage_error(with([](Options& o) { o.device = "cuda"; }), "--device cuda: no GPU visible");
    expect_usage_error(with([](Options& o) { o.device = "cuda", o.bucketed = true; }), "--device cuda: no GPU visible");
  }
#else
  expect_usage_error(with([](Options& o) { o.backend = "nccl"; }), "--backend nccl: this build has no CUDA/NCCL");
  expect_usage_error(with([](Options& o) { o.device = "cuda"; }), "--device cuda: this build has no CUDA/NCCL");
#endif
}
