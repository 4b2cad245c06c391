// The NCCL backend asked for where no GPU is visible: a clear error at every rank count (at one rank
// too: a backend named nccl is built there). Its sums, on a host store staged through the GPU and
// on a store on the GPU, are tested in tests/gpu_mpi (label gpu).
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

TEST(NcclBackend, WithoutAGpuTheErrorSaysSo) {
  World& w = world();
  if (nccl_device_count() > 0) GTEST_SKIP() << "a GPU is visible";
  ParamStore s;
  CommConfig cfg;
  cfg.backend = "nccl";
  try {
    make_communicator(w, cfg, s);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("nccl"), std::string::npos) << e.what();
  }
}
