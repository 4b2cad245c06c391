// The MPI world of a multi-rank test binary (MPI is initialised by mpi_gtest_main.cpp).
#pragma once
#include "comm/world.h"

namespace mlpd {
World& test_world();
}  // namespace mlpd
