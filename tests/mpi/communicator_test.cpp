// Runs under mpirun at 1..4 ranks (oversubscribed). The communicator's sums are checked bit for
// bit against a reference computed here from every rank's data in the canonical order.
#include <gtest/gtest.h>

#include "test_world.h"
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "comm/backend.h"
#include "comm/collectives.h"
#include "comm/communicator.h"
#include "core/check.h"

using namespace mlpd;

namespace {

World& world() { return test_world(); }

// Odd view sizes (some large enough for several hierarchical chunks), forward order.
ParamStore make_store(uint32_t seed) {
  ParamStore s;
  std::mt19937 g(seed);
  const size_t sizes[] = {3, 1, 4097, 27, 70001, 5, 999, 12289, 1, 300007, 17, 65, 8191, 33, 2};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "p%zu", i);
    add_param(s, name, sizes[i] + g() % 3, i % 2 ? ParamKind::bias : ParamKind::weight);
  }
  finalize_params(s);
  return s;
}

// Non-integer values whose sums depend on the order of additions, different on every rank.
void fill_grads(ParamStore& s, int rank, int salt) {
  std::mt19937 g(static_cast<uint32_t>(1234 + 7919 * rank + salt));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::fill(s.grads.begin(), s.grads.end(), 0.0f);
  for (const auto& v : s.views)
    for (size_t i = 0; i < v.count; ++i) s.grads[v.offset + i] = u(g) * std::pow(10.0f, static_cast<float>(g() % 7) - 3);
}

float round_to(float x, WirePrecision p) {
  round_to_wire(&x, 1, p);
  return x;
}

// Reference: gather every rank's buffer, sum in the canonical order, rank order
// ((x0 + x1) + x2) + x3 whatever the nodes, with fp32 adds exactly as reduce_kernels.h defines
// them (inputs and result rounded to the wire precision p). `per` > 0: instead the old order by
// node, (x0 + x1) + (x2 + x3) for nodes of 2, only for a control that must differ.
std::vector<float> reference_sum(const std::vector<float>& mine, WirePrecision p = WirePrecision::fp32,
                                 int per = 0) {
  World& w = world();
  const size_t n = mine.size();
  std::vector<float> all(n * static_cast<size_t>(w.size));
  MPI_Allgather(mine.data(), static_cast<int>(n), MPI_FLOAT, all.data(), static_cast<int>(n), MPI_FLOAT, MPI_COMM_WORLD);
  if (per <= 0) per = w.size;
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    float total = 0;
    for (int node0 = 0; node0 < w.size; node0 += per) {
      float acc = round_to(all[static_cast<size_t>(node0) * n + i], p);
      for (int r = node0 + 1; r < std::min(node0 + per, w.size); ++r)
        acc += round_to(all[static_cast<size_t>(r) * n + i], p);
      total = node0 == 0 ? acc : total + acc;
    }
    out[i] = round_to(total, p);
  }
  return out;
}

void expect_bits_equal(const ParamStore& s, const std::vector<float>& got, const std::vector<float>& want,
                       const std::string& what) {
  for (const auto& v : s.views)
    for (size_t i = v.offset; i < v.offset + v.count; ++i)
      if (std::memcmp(&got[i], &want[i], 4) != 0) {
        ADD_FAILURE() << what << ": element " << i << " (view " << v.name << ") got " << got[i] << " want " << want[i];
        return;
      }
}

// One simulated step: views signalled in reverse order, `work` between them.
void bucketed_step(Communicator& c, ParamStore& s, bool signal, void (*work)() = nullptr) {
  grads_begin_step(c);
  if (signal)
    for (size_t v = s.views.size(); v > 0; --v) {
      if (work) work();
      grad_ready(c, s, v - 1);
    }
  grads_finish_step(c, s);
}

// `steps` bucketed steps on `input` (buffers, windows and staging regions are reused), then the
// flat allreduce through the same communicator: every one must give exactly `want`.
void expect_sums_to(Communicator& c, ParamStore& s, const std::vector<float>& input, const std::vector<float>& want,
                    int steps, const std::string& what) {
  for (int step = 0; step < steps; ++step) {
    s.grads = input;
    bucketed_step(c, s, true);
    expect_bits_equal(s, s.grads, want, what + " step " + std::to_string(step));
  }
  std::vector<float> flat = input;
  allreduce_sum(c, flat.data(), flat.size());
  expect_bits_equal(s, flat, want, what + " flat");
}

}  // namespace

TEST(Communicator, BucketedEqualsFlatBitForBitForManyCaps) {
  World& w = world();
  ParamStore s = make_store(7);
  fill_grads(s, w.rank, 0);
  const std::vector<float> input = s.grads;
  const std::vector<float> want = reference_sum(input);
  for (const char* backend : {"auto", "mpi", "hierarchical"})
    for (double cap : {0.0001, 0.003, 0.05, 0.4, 2.0, 100.0})
      for (double chunk_kb : {16.0, 1024.0})
      for (double small_per_mb : {200.0, 0.0}) {
        CommConfig cfg;
        cfg.backend = backend;
        cfg.bucket_mb = cap;
        cfg.first_bucket_mb = cap / 3;
        cfg.chunk_kb = chunk_kb;
        cfg.small_kb = cap * small_per_mb;  // auto: move the mpi/hierarchical boundary around (0: default)
        auto c = make_communicator(w, cfg, s);
        std::string what = std::string(backend) + " cap " + std::to_string(cap) + " MB chunk " +
                           std::to_string(chunk_kb) + " KiB small " + std::to_string(cfg.small_kb) + " KiB";
        expect_sums_to(*c, s, input, want, 3, what);
      }
}

TEST(Communicator, PlainMpiAllreduceAgreesWithinRounding) {
  World& w = world();
  ParamStore s = make_store(8);
  fill_grads(s, w.rank, 1);
  std::vector<float> plain = s.grads;
  allreduce_sum_floats(w, plain.data(), plain.size());
  std::vector<float> mag(s.grads.size());
  for (size_t i = 0; i < mag.size(); ++i) mag[i] = std::fabs(s.grads[i]);
  mag = reference_sum(mag);  // sum of |x_r|: the scale of the rounding error
  auto c = make_communicator(w, CommConfig{}, s);
  bucketed_step(*c, s, true);
  for (size_t i = 0; i < plain.size(); ++i) {
    if (w.size <= 2) {
      ASSERT_EQ(s.grads[i], plain[i]) << i;  // two addends: every order gives the same bits
    } else {
      ASSERT_NEAR(s.grads[i], plain[i], 4e-7f * mag[i]) << i;  // a couple of ulps of the magnitude
    }
  }
}

// Values whose sum tells the orders apart: every 5th element x = 1, 0, 2^-24, 2^-24 (rank order
// 1, node sums of 2 ranks 1 + 2^-23), the next 1e8, 1, -1e8, 1 (rank order 1, node sums 0), the
// next -0.0 on every rank; random values elsewhere.
void fill_order_sensitive(ParamStore& s, int rank, int salt) {
  fill_grads(s, rank, salt);
  const float a[4] = {1.0f, 0.0f, std::ldexp(1.0f, -24), std::ldexp(1.0f, -24)};
  const float b[4] = {1e8f, 1.0f, -1e8f, 1.0f};
  for (size_t i = 0; i + 2 < s.grads.size(); i += 5) {
    s.grads[i] = a[rank % 4];
    s.grads[i + 1] = b[rank % 4];
    s.grads[i + 2] = -0.0f;
  }
}

// The sum is rank order whatever the (pretend) nodes: nodes of 1, 2, 3 and 4 ranks (where they
// divide the ranks; mpi and auto also take unequal nodes) give the bits of one node, bucketed and
// flat alike, in fp32 and bf16. At 4 ranks a sum of node sums differs (checked: the test can fail).
TEST(CommunicatorTwoPlusRanks, SumIsRankOrderWhateverTheNodeLayout) {
  World& w = world();
  ASSERT_GE(w.size, 2) << "registered only at 2+ ranks (tests/CMakeLists.txt): at one nothing is summed";
  ParamStore s = make_store(9);
  fill_order_sensitive(s, w.rank, 2);
  const std::vector<float> input = s.grads;
  if (w.size == 4) {  // control: the old order (node sums) differs from rank order on these values
    const std::vector<float> ranks = reference_sum(input), nodes = reference_sum(input, WirePrecision::fp32, 2);
    size_t differ = 0;
    for (size_t i = 0; i < input.size(); ++i) differ += std::memcmp(&ranks[i], &nodes[i], 4) != 0;
    EXPECT_GT(differ, input.size() / 5) << "the values do not tell rank order from node sums";
  }
  for (const char* prec : {"fp32", "bf16"}) {
    const std::vector<float> want = reference_sum(input, parse_precision(prec));
    for (int rpn : {0, 1, 2, 3, 4}) {
      if (rpn > w.size) continue;
      for (const char* backend : {"hierarchical", "mpi", "auto"}) {
        if (w.size % std::max(rpn, 1) != 0 && std::string(backend) == "hierarchical") continue;  // refuses
        for (double chunk_kb : {16.0, 1024.0}) {
          CommConfig cfg;
          cfg.backend = backend;
          cfg.precision = prec;
          cfg.ranks_per_node = rpn;
          cfg.bucket_mb = 0.2;
          cfg.chunk_kb = chunk_kb;  // 16 KiB: many jobs in the chain across nodes at once
          auto c = make_communicator(w, cfg, s);
          const std::string what = std::string(backend) + " " + prec + " nodes of " + std::to_string(rpn) +
                                   " chunk " + std::to_string(chunk_kb) + " KiB";
          expect_sums_to(*c, s, input, want, 2, what);
        }
      }
    }
  }
}

// Nodes whose ranks are not consecutive (here pretended: even ranks on one node, odd on the
// other, as mpirun --map-by node lays them out) cannot chain node by node in rank order: the
// hierarchical backend is then the mpi backend, and the sum is still rank order.
TEST(CommunicatorThreePlusRanks, NodesOfNonConsecutiveRanksStillSumInRankOrder) {
  World& w = world();
  ASSERT_GE(w.size, 3) << "registered only at 3+ ranks (tests/CMakeLists.txt): a node of non-consecutive ranks";
  Topology t;
  MPI_Comm_dup(MPI_COMM_WORLD, &t.world);
  MPI_Comm_split(t.world, w.rank % 2, w.rank, &t.node);
  t.rank = w.rank;
  t.size = w.size;
  MPI_Comm_rank(t.node, &t.local_rank);
  MPI_Comm_size(t.node, &t.local_size);
  t.node_index = w.rank % 2;
  t.nodes = 2;
  t.uniform = w.size % 2 == 0;
  for (int g = 0; g < 2; ++g) {
    t.groups.push_back(static_cast<int>(t.order.size()));
    for (int r = g; r < w.size; r += 2) t.order.push_back(r);
  }
  MPI_Comm_split(t.world, t.local_rank, t.node_index, &t.rail);
  std::vector<float> x(70001);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = i % 5 == 0 ? (w.rank == 0 ? 1.0f : w.rank == 1 ? 0.0f : std::ldexp(1.0f, -24))
                      : std::sin(static_cast<float>(i * (w.rank + 1))) * std::pow(10.0f, static_cast<float>(i % 7) - 3);
  const std::vector<float> want = reference_sum(x);
  {
    auto be = make_hierarchical_backend(t, WirePrecision::fp32, 0, 16384);
    EXPECT_STREQ(be->name(), "mpi");
    for (size_t off = 0; off < x.size(); off += be->max_job())
      be->submit(x.data() + off, std::min(be->max_job(), x.size() - off), 0);
    int spins = 0;
    while (!be->progress()) idle_wait(spins);
  }
  for (size_t i = 0; i < x.size(); ++i)
    if (std::memcmp(&x[i], &want[i], 4) != 0) {
      ADD_FAILURE() << "element " << i << " got " << x[i] << " want " << want[i];
      break;
    }
  for (MPI_Comm* c : {&t.rail, &t.node, &t.world}) MPI_Comm_free(c);
}

TEST(Communicator, OverlappedBackwardEqualsFlatAndUnsignalledBucketsStillReduce) {
  World& w = world();
  ParamStore s = make_store(10);
  fill_grads(s, w.rank, 3);
  const std::vector<float> input = s.grads;
  const std::vector<float> want = reference_sum(input);
  for (bool overlap : {true, false})
    for (bool signal : {true, false}) {
      CommConfig cfg;
      cfg.overlap = overlap;
      cfg.record_spans = true;
      cfg.bucket_mb = 0.3;
      cfg.first_bucket_mb = 0.05;
      auto c = make_communicator(w, cfg, s);
      s.grads = input;
      // A "backward" that computes between the views (a rank-dependent amount: ranks drift apart).
      static int rank_for_work;
      rank_for_work = w.rank;
      bucketed_step(*c, s, signal, [] {
        volatile double x = 0;
        for (int i = 0; i < 20000 * (1 + rank_for_work); ++i) x = x + 1e-9 * i;
      });
      expect_bits_equal(s, s.grads, want,
                        std::string("overlap ") + (overlap ? "on" : "off") + (signal ? " signalled" : " unsignalled"));
      auto spans = take_spans(*c);
      EXPECT_EQ(spans.size(), buckets(*c).size());
      for (const auto& sp : spans) EXPECT_LE(sp.start_s, sp.end_s);
    }
}

TEST(Communicator, CompressedPrecisionErrorIsBoundedAndIdenticalOnAllRanks) {
  World& w = world();
  ParamStore s = make_store(11);
  fill_grads(s, w.rank, 4);
  const std::vector<float> input = s.grads;
  const std::vector<float> exact = reference_sum(input);
  std::vector<float> mag(input.size());
  for (size_t i = 0; i < mag.size(); ++i) mag[i] = std::fabs(input[i]);
  mag = reference_sum(mag);  // sum over ranks of |x_r|: the scale the roundings act on
  for (const char* prec : {"bf16", "fp16"}) {
    for (const char* backend : {"mpi", "hierarchical"}) {
      CommConfig cfg;
      cfg.precision = prec;
      cfg.backend = backend;
      cfg.bucket_mb = 0.5;
      auto c = make_communicator(w, cfg, s);
      s.grads = input;
      bucketed_step(*c, s, true);
      // Error relative to sum_r |x_r| (what rounding the inputs and the result acts on).
      double worst = 0, sum_rel = 0;
      size_t cnt = 0;
      for (const auto& v : s.views)
        for (size_t i = v.offset; i < v.offset + v.count; ++i) {
          double scale = static_cast<double>(mag[i]) + 1e-30;
          double e = std::fabs(static_cast<double>(s.grads[i]) - exact[i]) / scale;
          if (mag[i] < 1e-3f && std::string(prec) == "fp16") continue;  // near fp16's subnormal range
          worst = std::max(worst, e);
          sum_rel += e;
          ++cnt;
        }
      // bf16 keeps 8 significant bits (relative half-ulp 2^-8), fp16 11 (2^-11): each input and
      // the result are rounded once, so |error| <= 2 half-ulps of sum|x_r| (plus fp32 noise).
      const double bound = std::string(prec) == "bf16" ? 2.0 / 256 + 1e-5 : 2.0 / 2048 + 1e-5;
      if (w.rank == 0)
        std::printf("[ precision ] %s via %s at %d ranks: max relative error %.3g, mean %.3g (bound %.3g)\n", prec,
                    backend, w.size, worst, sum_rel / static_cast<double>(cnt), bound);
      if (w.size > 1) {
        EXPECT_GT(worst, 0.0) << "compression had no effect";
      }
      EXPECT_LE(worst, bound);
      // Every rank holds identical bits.
      std::vector<float> r0 = s.grads;
      MPI_Bcast(r0.data(), static_cast<int>(r0.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
      ASSERT_EQ(std::memcmp(r0.data(), s.grads.data(), r0.size() * 4), 0) << "ranks disagree with " << prec;
    }
  }
}

TEST(Communicator, IntegerDataIsExactAndDescribeSaysWhatItDoes) {
  World& w = world();
  ParamStore s = make_store(12);
  for (size_t i = 0; i < s.grads.size(); ++i) s.grads[i] = static_cast<float>((w.rank + 1) * (i % 11));
  auto c = make_communicator(w, CommConfig{}, s);
  bucketed_step(*c, s, true);
  const float ranks = static_cast<float>(w.size * (w.size + 1) / 2);
  for (const auto& v : s.views)
    for (size_t i = v.offset; i < v.offset + v.count; ++i) ASSERT_EQ(s.grads[i], ranks * static_cast<float>(i % 11));
  std::string d = describe(*c);
  EXPECT_NE(d.find("buckets"), std::string::npos) << d;
  EXPECT_NE(d.find("fp32"), std::string::npos) << d;
  if (w.rank == 0) std::printf("[ describe ] %s\n", d.c_str());
}

TEST(Communicator, BadConfigIsAUserError) {
  World& w = world();
  ParamStore s = make_store(13);
  CommConfig bad;
  bad.backend = "carrier-pigeon";
  EXPECT_THROW(make_communicator(w, bad, s), UserError);
  CommConfig badp;
  badp.precision = "fp8";
  EXPECT_THROW(make_communicator(w, badp, s), UserError);
}

// A store on the GPU (here only marked so: its device buffers are never touched where nothing is
// reduced, or where making the backend fails first): nccl in fp32 only, the same bucket layout as
// on the CPU, the GPU's default cap; at 1 rank a step reduces nothing; at more ranks auto means nccl.
TEST(Communicator, StoreOnTheGpuTakesNcclInFp32AndKeepsTheBucketLayout) {
  World& w = world();
  ParamStore host = make_store(14);
  ParamStore gpu = make_store(14);
  gpu.device = Device::cuda;
  for (const char* be : {"mpi", "hierarchical"}) {
    CommConfig cfg;
    cfg.backend = be;
    try {
      make_communicator(w, cfg, gpu);
      ADD_FAILURE() << be << " accepted a store on the GPU";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("use auto or nccl"), std::string::npos) << e.what();
    }
  }
  CommConfig bf16;
  bf16.precision = "bf16";
  try {
    make_communicator(w, bf16, gpu);
    ADD_FAILURE() << "bf16 accepted for a store on the GPU";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("fp32 only"), std::string::npos) << e.what();
  }
  if (w.size > 1) {
    if (nccl_device_count() > 0) GTEST_SKIP() << "a GPU is visible: the device path is tested in tests/gpu_mpi";
    try {
      make_communicator(w, CommConfig{}, gpu);
      ADD_FAILURE() << "auto with a store on the GPU and no GPU was accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("nccl"), std::string::npos) << e.what();
    }
    return;
  }
  CommConfig cfg;
  cfg.bucket_mb = 0.3;
  auto on_gpu = make_communicator(w, cfg, gpu);
  auto on_cpu = make_communicator(w, cfg, host);
  const auto a = buckets(*on_gpu), b = buckets(*on_cpu);
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].offset, b[k].offset) << k;
    EXPECT_EQ(a[k].count, b[k].count) << k;
    EXPECT_EQ(a[k].backend, "none");
  }
  grads_begin_step(*on_gpu);
  for (size_t v = gpu.views.size(); v > 0; --v) grad_ready(*on_gpu, gpu, v - 1);
  grads_finish_step(*on_gpu, gpu);
  EXPECT_TRUE(comm_progress(*on_gpu));
  const std::string d = describe(*make_communicator(w, CommConfig{}, gpu));
  EXPECT_NE(d.find("cap 25.0"), std::string::npos) << d;
  EXPECT_NE(d.find("gradients on the GPU"), std::string::npos) << d;
}
