// Runs under mpirun at 1..4 ranks (see tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include "test_world.h"

#include <vector>

#include "comm/collectives.h"
#include "comm/gather_strings.h"

using namespace mlpd;

namespace {
World& world() { return test_world(); }
}  // namespace

TEST(World, RanksAndNodesAreConsistent) {
  World& w = world();
  EXPECT_GE(w.rank, 0);
  EXPECT_LT(w.rank, w.size);
  EXPECT_LT(w.local_rank, w.local_size);
  EXPECT_EQ(w.nodes, 1);  // all ranks of a test run share this machine
  EXPECT_EQ(w.local_size, w.size);
}

TEST(Collectives, AllreduceSumOfOddSizeIsExact) {
  World& w = world();
  for (size_t n : {1u, 7u, 1001u, 65537u}) {
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>((w.rank + 1) * (i % 13));
    allreduce_sum_floats(w, x.data(), n);
    float ranks_sum = static_cast<float>(w.size * (w.size + 1) / 2);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(x[i], ranks_sum * static_cast<float>(i % 13)) << "n=" << n << " i=" << i;
  }
}

TEST(Collectives, BroadcastParametersCopiesRankZero) {
  World& w = world();
  ParamStore s;
  add_param(s, "w", 37, ParamKind::weight);
  add_state(s, "m", 5);
  finalize_params(s);
  for (size_t i = 0; i < s.params.size(); ++i) s.params[i] = static_cast<float>(w.rank * 100 + i);
  for (size_t i = 0; i < s.state.size(); ++i) s.state[i] = static_cast<float>(w.rank);
  broadcast_parameters(w, s);
  for (size_t i = 0; i < s.params.size(); ++i) ASSERT_EQ(s.params[i], static_cast<float>(i));
  for (float v : s.state) ASSERT_EQ(v, 0.0f);
}

TEST(Collectives, EvalCountsSumAcrossRanks) {
  World& w = world();
  int64_t counts[2] = {w.rank + 1, 10};
  allreduce_sum_i64(w, counts, 2);
  EXPECT_EQ(counts[0], w.size * (w.size + 1) / 2);
  EXPECT_EQ(counts[1], 10 * w.size);
  EXPECT_EQ(allreduce_max(w, static_cast<double>(w.rank)), static_cast<double>(w.size - 1));
}

// Strings of different lengths (rank 1's empty) reach every rank, in rank order, byte for byte.
TEST(Collectives, AllgatherStringsGivesEveryRankEveryString) {
  World& w = world();
  std::string mine = w.rank == 1 ? std::string() : std::string(size_t(100 * w.rank + 3), char('a' + w.rank));
  mine.push_back('\0');
  const std::vector<std::string> all = allgather_strings(w, mine);
  ASSERT_EQ(all.size(), size_t(w.size));
  for (int r = 0; r < w.size; ++r) {
    std::string want = r == 1 ? std::string() : std::string(size_t(100 * r + 3), char('a' + r));
    want.push_back('\0');
    EXPECT_EQ(all[size_t(r)], want) << "rank " << r;
  }
}
