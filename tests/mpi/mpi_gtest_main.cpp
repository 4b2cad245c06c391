// main() for multi-rank GoogleTest binaries: MPI is initialised once; only rank 0 prints, and
// the job fails if any rank failed.
#include <gtest/gtest.h>
#include <mpi.h>

#include "test_world.h"

namespace mlpd {
World& test_world() {
  static World w = init_world(nullptr, nullptr);
  return w;
}
}  // namespace mlpd

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed;
}
