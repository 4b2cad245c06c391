#include <gtest/gtest.h>

#include "core/arena.h"
#include "core/fpu.h"
#include "core/param_store.h"
#include "core/rng.h"

using namespace mlpd;

TEST(Arena, HandsOutAlignedDisjointBlocksAndResets) {
  Arena a;
  arena_init(a, 1 << 16);
  float* x = arena_floats(a, 3);
  float* y = arena_floats(a, 5);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(x) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(y) % 64, 0u);
  EXPECT_GE(y, x + 3);
  arena_reset(a);
  EXPECT_EQ(arena_floats(a, 1), x);
}

TEST(Arena, ThrowsWhenTooSmall) {
  Arena a;
  arena_init(a, 256);
  EXPECT_THROW(arena_floats(a, 1000), std::runtime_error);
}

TEST(Arena, ScopeReleasesScratch) {
  Arena a;
  arena_init(a, 1 << 12);
  size_t before = a.offset;
  {
    ArenaScope s(a);
    arena_floats(a, 100);
    EXPECT_GT(a.offset, before);
  }
  EXPECT_EQ(a.offset, before);
}

TEST(ParamStore, ViewsAreAlignedAndContiguous) {
  ParamStore s;
  size_t w = add_param(s, "w", 10, ParamKind::weight);
  size_t b = add_param(s, "b", 3, ParamKind::bias);
  add_state(s, "mean", 3);
  finalize_params(s);
  EXPECT_EQ(s.views[w].offset, 0u);
  EXPECT_EQ(s.views[b].offset, 16u);
  EXPECT_EQ(s.params.size(), 32u);
  EXPECT_EQ(s.grads.size(), s.params.size());
  EXPECT_EQ(s.state.size(), 16u);
  EXPECT_THROW(add_param(s, "late", 1, ParamKind::weight), std::runtime_error);
}

TEST(ParamStore, FingerprintChangesWithOneBit) {
  ParamStore s;
  add_param(s, "w", 8, ParamKind::weight);
  finalize_params(s);
  uint64_t h0 = params_fingerprint(s);
  s.params[3] = 1e-30f;
  EXPECT_NE(h0, params_fingerprint(s));
}

TEST(Rng, CounterBasedIsReproducibleAndUniform) {
  EXPECT_EQ(rng_u64(1, 2, 3), rng_u64(1, 2, 3));
  EXPECT_NE(rng_u64(1, 2, 3), rng_u64(1, 2, 4));
  double sum = 0;
  int counts[10] = {0};
  for (int i = 0; i < 100000; ++i) {
    sum += rng_uniform(7, 0, i);
    counts[rng_below(7, 1, i, 10)]++;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.01);
  for (int c : counts) EXPECT_NEAR(c, 10000, 500);
}

TEST(Fpu, FlushDenormalsMakesDenormalArithmeticZero) {
  ASSERT_TRUE(enable_flush_denormals());
  volatile float tiny = 1e-39f;  // a denormal
  volatile float r = tiny * 1.0f;
  EXPECT_EQ(r, 0.0f);
}
