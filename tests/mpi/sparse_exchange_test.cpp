// Runs under mpirun at 1..4 ranks (oversubscribed). The sparse exchange of embedding-table
// gradients (comm/sparse_exchange.h) against the dense path, bit for bit: random tables with random
// touched rows per rank, rows touched by one rank only, rows of -0.0 touched by some ranks (the
// dense sum adds the others' +0.0 and gives +0.0) and by all (-0.0 stays), cancellations, sparse
// views between dense ones, pretend nodes (rank order whatever the nodes) and bf16 on the wire. A control
// shows that the naive sparse sum (touching ranks only) differs from the dense one on these data,
// so the comparison can fail.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/sparse_exchange.h"
#include "core/check.h"
#include "test_world.h"

using namespace mlpd;

namespace {

World& world() { return test_world(); }

struct Tables {
  ParamStore store;
  std::vector<SparseRows> sparse;  // rows filled per trial
};

// Dense and sparse views interleaved (forward order), odd sizes and widths.
Tables make_tables() {
  Tables t;
  ParamStore& s = t.store;
  add_param(s, "dense0", 1000, ParamKind::weight);
  const size_t e0 = add_param(s, "e0_embedding", 50 * 1, ParamKind::weight);
  add_param(s, "dense1", 33, ParamKind::bias);
  const size_t e1 = add_param(s, "e1_embedding", 23 * 7, ParamKind::weight);
  const size_t e2 = add_param(s, "e2_embedding", 300 * 64, ParamKind::weight);
  add_param(s, "dense2", 70001, ParamKind::weight);
  finalize_params(s);
  t.sparse = {{e0, 1, {}}, {e1, 7, {}}, {e2, 64, {}}};
  return t;
}

// This rank's gradients for one trial: dense views random; in each table every untouched row +0.0
// and the touched rows listed. Rows 3r and 3r+1 are touched by rank r only (random, and -0.0);
// row 3P is -0.0 on every rank, row 3P+1 random on every rank; the rest with probability `p`.
// Values: random of many magnitudes, exact -0.0 and +0.0, and small integers that cancel.
void fill_trial(Tables& t, int rank, int ranks, int trial, double p) {
  ParamStore& s = t.store;
  std::mt19937 g(static_cast<uint32_t>(977 * trial + 31 * rank + 5));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto value = [&]() {
    const unsigned k = g() % 10;
    if (k == 0) return -0.0f;
    if (k == 1) return 0.0f;
    if (k <= 3) return static_cast<float>(static_cast<int>(g() % 5) - 2);
    return u(g) * std::pow(10.0f, static_cast<float>(g() % 7) - 3);
  };
  std::fill(s.grads.begin(), s.grads.end(), 0.0f);
  std::vector<char> sparse_view(s.views.size(), 0);
  for (const SparseRows& r : t.sparse) sparse_view[r.view] = 1;
  for (size_t v = 0; v < s.views.size(); ++v)
    if (!sparse_view[v])
      for (size_t i = 0; i < s.views[v].count; ++i) s.grads[s.views[v].offset + i] = value();
  std::bernoulli_distribution touch(p);
  for (SparseRows& r : t.sparse) {
    const ParamView& v = s.views[r.view];
    const size_t rows = v.count / r.width;
    r.rows.clear();
    for (size_t row = 0; row < rows; ++row) {
      const size_t P = static_cast<size_t>(ranks);
      bool mine = false, negzero = false;
      if (row < 3 * P) {
        mine = row / 3 == static_cast<size_t>(rank) && row % 3 != 2;
        negzero = row % 3 == 1;
      } else if (row == 3 * P) {
        mine = negzero = true;
      } else if (row == 3 * P + 1) {
        mine = true;
      } else {
        mine = touch(g);
      }
      if (!mine) continue;
      r.rows.push_back(static_cast<int32_t>(row));
      float* x = s.grads.data() + v.offset + row * r.width;
      for (size_t j = 0; j < r.width; ++j) x[j] = negzero ? -0.0f : value();
    }
  }
}

// Every rank's buffer and touched-row flags, gathered.
struct Gathered {
  std::vector<float> grads;        // [rank][n]
  std::vector<char> touched;       // [rank][n]: element in a touched row of a table
};

Gathered gather(const Tables& t) {
  World& w = world();
  const ParamStore& s = t.store;
  const size_t n = s.grads.size();
  std::vector<char> mine(n, 0);
  for (const SparseRows& r : t.sparse)
    for (int32_t row : r.rows)
      std::fill_n(mine.begin() + static_cast<long>(s.views[r.view].offset + static_cast<size_t>(row) * r.width),
                  r.width, 1);
  Gathered all;
  all.grads.resize(n * static_cast<size_t>(w.size));
  all.touched.resize(n * static_cast<size_t>(w.size));
  MPI_Allgather(s.grads.data(), static_cast<int>(n), MPI_FLOAT, all.grads.data(), static_cast<int>(n), MPI_FLOAT,
                MPI_COMM_WORLD);
  MPI_Allgather(mine.data(), static_cast<int>(n), MPI_CHAR, all.touched.data(), static_cast<int>(n), MPI_CHAR,
                MPI_COMM_WORLD);
  return all;
}

// The canonical fp32 sum: rank order, from rank 0's contribution (comm/reduce_kernels.h), whatever
// the nodes. naive: only the ranks that touched a table element's row contribute (what a sparse sum
// without the +0.0 rule gives).
std::vector<float> reference(const Gathered& all, size_t n, bool naive) {
  World& w = world();
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    bool anyone = false;  // some rank touched this table element's row
    for (int q = 0; q < w.size; ++q) anyone = anyone || all.touched[static_cast<size_t>(q) * n + i];
    bool any = false;
    float acc = 0;
    for (int r = 0; r < w.size; ++r) {
      const size_t k = static_cast<size_t>(r) * n + i;
      if (naive && anyone && !all.touched[k]) continue;
      acc = any ? acc + all.grads[k] : all.grads[k];
      any = true;
    }
    out[i] = acc;
  }
  return out;
}

size_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], 4) != 0) return i;
  return a.size();
}

void step(Communicator& c, Tables& t) {
  grads_begin_step(c);
  for (size_t v = t.store.views.size(); v > 0; --v) grad_ready(c, t.store, v - 1);
  grads_finish_step(c, t.store, t.sparse);
}

}  // namespace

TEST(SparseExchange, EqualsDenseSumBitForBit) {
  World& w = world();
  int naive_differs = 0, negzero_fixed = 0;
  for (int rpn : {0, 1, 2}) {
    if (rpn > w.size) continue;
    for (double p : {0.05, 0.5}) {
      for (int trial = 0; trial < 2; ++trial) {
        Tables t = make_tables();
        fill_trial(t, w.rank, w.size, trial + 10 * static_cast<int>(p * 100), p);
        const std::vector<float> input = t.store.grads;
        const Gathered all = gather(t);
        const std::vector<float> want = reference(all, input.size(), false);
        const std::vector<float> naive = reference(all, input.size(), true);
        if (w.size > 1 && first_difference(naive, want) < want.size()) ++naive_differs;
        for (size_t i = 0; i < want.size(); ++i)
          if (std::signbit(naive[i]) && naive[i] == 0.0f && !std::signbit(want[i]) && want[i] == 0.0f) {
            ++negzero_fixed;
            break;
          }
        for (const char* mode : {"off", "on", "auto"})
          for (double cap : {0.001, 4.0}) {
            CommConfig cfg;
            cfg.sparse_embeddings = mode;
            cfg.ranks_per_node = rpn;
            cfg.bucket_mb = cap;
            cfg.first_bucket_mb = cap / 4;
            auto c = make_communicator(w, cfg, t.store, t.sparse);
            for (int again = 0; again < 2; ++again) {  // scratch and staging reused
              t.store.grads = input;
              step(*c, t);
              const size_t d = first_difference(t.store.grads, want);
              EXPECT_EQ(d, want.size()) << "mode " << mode << " cap " << cap << " p " << p << " rpn " << rpn
                                        << ": element " << d << " got " << t.store.grads[d] << " want " << want[d];
            }
            const SparseStats st = sparse_stats(*c);
            if (w.size > 1 && std::string(mode) == "on") {
              EXPECT_EQ(st.sparse_steps, 2);
            }
            if (std::string(mode) == "off" || w.size == 1) {
              EXPECT_FALSE(st.active);
            }
            EXPECT_EQ(st.sparse_steps + st.dense_steps, st.active ? 2 : 0);
          }
      }
    }
  }
  if (w.size > 1) {
    // The control: the data hold rows where skipping an untouching rank's +0.0 changes the bits.
    EXPECT_GT(naive_differs, 0);
    EXPECT_GT(negzero_fixed, 0);
  }
}

TEST(SparseExchangeTwoPlusRanks, AutoTakesBothPathsAndStaysExact) {
  World& w = world();
  ASSERT_GE(w.size, 2) << "registered only at 2+ ranks (tests/CMakeLists.txt): at one nothing is exchanged";
  Tables t = make_tables();
  CommConfig cfg;  // auto
  auto c = make_communicator(w, cfg, t.store, t.sparse);
  ASSERT_TRUE(sparse_stats(*c).active);
  // Few rows: the gathered rows are fewer bytes than the tables (sparse); every row on every rank:
  // more (dense).
  for (double p : {0.02, 1.0}) {
    fill_trial(t, w.rank, w.size, 77, p);
    const std::vector<float> input = t.store.grads;
    const std::vector<float> want = reference(gather(t), input.size(), false);
    step(*c, t);
    EXPECT_EQ(first_difference(t.store.grads, want), want.size()) << "p " << p;
  }
  const SparseStats st = sparse_stats(*c);
  EXPECT_EQ(st.sparse_steps, 1);
  EXPECT_EQ(st.dense_steps, 1);
  EXPECT_NE(describe(*c).find("sparse embeddings auto"), std::string::npos) << describe(*c);
}

TEST(SparseExchange, Bf16OnTheWireMatchesDense) {
  World& w = world();
  Tables t = make_tables();
  fill_trial(t, w.rank, w.size, 5, 0.3);
  const std::vector<float> input = t.store.grads;
  std::vector<float> dense;
  for (const char* mode : {"off", "on"}) {
    CommConfig cfg;
    cfg.precision = "bf16";
    cfg.sparse_embeddings = mode;
    auto c = make_communicator(w, cfg, t.store, t.sparse);
    t.store.grads = input;
    step(*c, t);
    if (dense.empty())
      dense = t.store.grads;
    else
      EXPECT_EQ(first_difference(t.store.grads, dense), dense.size());
  }
}

TEST(SparseExchange, RulesAndErrors) {
  EXPECT_TRUE(sparse_is_cheaper(99, 100));
  EXPECT_FALSE(sparse_is_cheaper(100, 100));
  EXPECT_THROW(parse_sparse_mode("sometimes"), UserError);
  World& w = world();
  Tables t = make_tables();
  CommConfig cfg;
  cfg.sparse_embeddings = "sometimes";
  EXPECT_THROW(make_communicator(w, cfg, t.store, t.sparse), UserError);
  std::vector<SparseRows> bad = {{t.sparse[1].view, 5, {}}};  // 23 * 7 is not whole rows of 5
  EXPECT_ANY_THROW(make_communicator(w, CommConfig{}, t.store, bad));
}
