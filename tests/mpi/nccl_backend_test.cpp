// NCCL backend on a host store (staged through the GPU): runs where a GPU per rank on the node is
// visible (NCCL refuses two ranks on one GPU), skips elsewhere. Built everywhere; the device path
// (a store on the GPU) is tested in tests/gpu_mpi.
#include <gtest/gtest.h>

#include "test_world.h"

#include <vector>

#include "comm/backend.h"
#include "comm/communicator.h"
#include "core/check.h"

using namespace mlpd;

namespace {
World& world() { return test_world(); }
}  // namespace

TEST(NcclBackend, BucketedSumOfIntegerDataIsExact) {
  World& w = world();
  if (nccl_device_count() == 0) GTEST_SKIP() << "no GPU (or no NCCL in this build)";
  if (nccl_device_count() < w.local_size) GTEST_SKIP() << "NCCL needs a GPU per rank: fewer GPUs than ranks here";
  ParamStore s;
  for (size_t n : {3u, 4097u, 300001u, 17u}) add_param(s, "p", n, ParamKind::weight);
  finalize_params(s);
  for (size_t i = 0; i < s.grads.size(); ++i) s.grads[i] = static_cast<float>((w.rank + 1) * (i % 7));
  CommConfig cfg;
  cfg.backend = "nccl";
  cfg.bucket_mb = 0.5;
  auto c = make_communicator(w, cfg, s);
  grads_begin_step(*c);
  for (size_t v = s.views.size(); v > 0; --v) grad_ready(*c, s, v - 1);
  grads_finish_step(*c, s);
  const float tri = static_cast<float>(w.size * (w.size + 1) / 2);
  for (const auto& v : s.views)
    for (size_t i = v.offset; i < v.offset + v.count; ++i) ASSERT_EQ(s.grads[i], tri * static_cast<float>(i % 7)) << i;
  std::vector<float> flat(1000003);
  for (size_t i = 0; i < flat.size(); ++i) flat[i] = static_cast<float>(w.rank + 1);
  allreduce_sum(*c, flat.data(), flat.size());
  for (float x : flat) ASSERT_EQ(x, tri);
}

TEST(NcclBackend, WithoutAGpuTheErrorSaysSo) {
  World& w = world();
  if (nccl_device_count() > 0) GTEST_SKIP() << "a GPU is visible";
  ParamStore s;
  CommConfig cfg;
  cfg.backend = "nccl";
  if (w.size == 1) GTEST_SKIP() << "1 rank: no backend is built";
  try {
    make_communicator(w, cfg, s);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("nccl"), std::string::npos) << e.what();
  }
}
