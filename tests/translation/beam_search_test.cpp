// Beam search and greedy decoding on tiny hand-made models, checked against brute-force
// enumeration of every sequence.
#include "translation/beam_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <vector>

namespace mlpd {
namespace {

constexpr float kNever = -std::numeric_limits<float>::infinity();
constexpr int32_t kBos = 1, kEos = 2;

// A second-order Markov model per sentence: log p(tok | two tokens before, last token), stored as
// table[s][(p2 * V + p1) * V + tok]. Before the first token both context tokens are bos. The model
// keeps the token before each row's last one as its state, reordered by `parents` each step, as a
// real model reorders its LSTM state or attention cache: wrong parents give wrong log-probs.
struct MarkovModel {
  int vocab = 0;
  std::vector<std::vector<float>> tables;  // one per sentence

  float lp(int s, int32_t p2, int32_t p1, int32_t tok) const {
    return tables[s][(static_cast<size_t>(p2) * vocab + p1) * vocab + tok];
  }

  // A DecodeModel for sentences first..first+count-1 of the tables, decoded with `beam`.
  DecodeModel decode_model(int first, int count, int beam, int* calls = nullptr) const {
    auto prev_last = std::make_shared<std::vector<int32_t>>();  // last tokens of the previous step
    auto prev2 = std::make_shared<std::vector<int32_t>>();      // the token before each row's last
    DecodeModel m;
    m.vocab = vocab;
    m.step = [this, first, count, beam, calls, prev_last, prev2](int step, const int32_t* last, const int32_t* parents,
                                                                  int rows, float* out) {
      if (calls) ++*calls;
      ASSERT_EQ(rows, count * beam);  // pad rows keep the row count
      std::vector<int32_t> p2(rows, kBos);
      for (int r = 0; r < rows; ++r) {
        if (step == 0) {
          ASSERT_EQ(last[r], kBos);
          ASSERT_EQ(parents[r], r);
        } else {
          ASSERT_EQ(parents[r] / beam, r / beam) << "a parent in another sentence";
          p2[r] = (*prev_last)[parents[r]];
        }
      }
      *prev_last = std::vector<int32_t>(last, last + rows);
      *prev2 = p2;
      for (int r = 0; r < rows; ++r)
        for (int32_t v = 0; v < vocab; ++v) out[static_cast<size_t>(r) * vocab + v] = lp(first + r / beam, p2[r], last[r], v);
    };
    return m;
  }

  // The summed log-probability of `tokens` (then eos if `eos`) for sentence s, in decoding order.
  double log_prob(int s, const std::vector<int32_t>& tokens, bool eos) const {
    double sum = 0.0;
    int32_t p2 = kBos, p1 = kBos;
    for (int32_t t : tokens) {
      sum += lp(s, p2, p1, t);
      p2 = p1, p1 = t;
    }
    if (eos) sum += lp(s, p2, p1, kEos);
    return sum;
  }
};

// A first-order table (the token before the last is ignored) from rows of probabilities
// probs[last][tok]; 0 is "never".
std::vector<float> first_order(const std::vector<std::vector<double>>& probs) {
  const int V = static_cast<int>(probs.size());
  std::vector<float> t(static_cast<size_t>(V) * V * V);
  for (int p2 = 0; p2 < V; ++p2)
    for (int p1 = 0; p1 < V; ++p1)
      for (int v = 0; v < V; ++v)
        t[(static_cast<size_t>(p2) * V + p1) * V + v] = probs[p1][v] > 0 ? static_cast<float>(std::log(probs[p1][v])) : kNever;
  return t;
}

// A random second-order table: log-softmax of Gaussian logits (scaled by `peak`), eos shifted by
// `eos_bias`.
std::vector<float> random_table(int V, uint32_t seed, double peak, double eos_bias = 0.0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  std::vector<float> t(static_cast<size_t>(V) * V * V);
  for (int ctx = 0; ctx < V * V; ++ctx) {
    std::vector<double> z(V);
    double mx = -1e300;
    for (int v = 0; v < V; ++v) z[v] = peak * g(rng) + (v == kEos ? eos_bias : 0.0), mx = std::max(mx, z[v]);
    double sum = 0;
    for (double x : z) sum += std::exp(x - mx);
    for (int v = 0; v < V; ++v) t[static_cast<size_t>(ctx) * V + v] = static_cast<float>(z[v] - mx - std::log(sum));
  }
  return t;
}

// Every sequence: tokens (no eos) of length 0..max_len-1 followed by eos, and every length-max_len
// sequence without eos (cut); the best by score, the first in enumeration order on a tie.
DecodedHypothesis brute_force(const MarkovModel& m, int s, const DecodeOptions& o) {
  DecodedHypothesis best;
  best.score = -std::numeric_limits<double>::infinity();
  bool found = false;
  std::vector<int32_t> seq;
  auto consider = [&](bool eos) {
    const double lp = m.log_prob(s, seq, eos);
    if (lp == -std::numeric_limits<double>::infinity()) return;
    const int len = static_cast<int>(seq.size()) + (eos ? 1 : 0);
    const double score = lp / gnmt_length_penalty(len, o.length_penalty);
    if (!found || score > best.score) best = {seq, lp, score, eos}, found = true;
  };
  auto rec = [&](auto&& self) -> void {
    if (static_cast<int>(seq.size()) == o.max_len) return consider(false);
    consider(true);
    for (int32_t v = 0; v < m.vocab; ++v) {
      if (v == kEos) continue;
      seq.push_back(v);
      self(self);
      seq.pop_back();
    }
  };
  rec(rec);
  return best;
}

// Greedy decoding written out directly: the argmax (lowest id on a tie) until eos or max_len.
std::vector<int32_t> greedy(const MarkovModel& m, int s, int max_len) {
  std::vector<int32_t> out;
  int32_t p2 = kBos, p1 = kBos;
  for (int step = 0; step < max_len; ++step) {
    int32_t arg = 0;
    for (int32_t v = 1; v < m.vocab; ++v)
      if (m.lp(s, p2, p1, v) > m.lp(s, p2, p1, arg)) arg = v;
    if (arg == kEos) break;
    out.push_back(arg);
    p2 = p1, p1 = arg;
  }
  return out;
}

// Tokens: 0, 1 = bos, 2 = eos, 3, 4.
//   after bos: 3 (0.5), 4 (0.4), eos (0.1)
//   after 3:   3 (0.3), 4 (0.3), eos (0.4)     -> "3 eos": 0.5 * 0.4 = 0.20
//   after 4:   3 (0.05), 4 (0.05), eos (0.9)   -> "4 eos": 0.4 * 0.9 = 0.36
// Greedy takes 3 (0.5 > 0.4) and ends with 0.20; beam 2 keeps 4 alive and finds 0.36.
MarkovModel greedy_trap() {
  MarkovModel m;
  m.vocab = 5;
  m.tables.push_back(first_order({
      {0, 0, 1, 0, 0},        // after 0 (unused): eos
      {0, 0, 0.1, 0.5, 0.4},  // after bos
      {0, 0, 1, 0, 0},        // after eos (pad rows)
      {0, 0, 0.4, 0.3, 0.3},  // after 3
      {0, 0, 0.9, 0.05, 0.05},
  }));
  return m;
}

TEST(BeamSearch, Beam2FindsTheBestSequenceGreedyMisses) {
  const MarkovModel m = greedy_trap();
  DecodeOptions o;
  o.length_penalty = 0;
  o.max_len = 4;
  const DecodedHypothesis best = brute_force(m, 0, o);
  ASSERT_EQ(best.tokens, (std::vector<int32_t>{4}));  // 0.36 beats every other sequence
  EXPECT_NEAR(best.log_prob, std::log(0.36), 1e-6);

  o.beam = 1;
  EXPECT_EQ(beam_search(1, m.decode_model(0, 1, 1), o)[0], (std::vector<int32_t>{3}));  // greedy: 0.20
  o.beam = 2;
  const DecodedHypothesis h = beam_search_hypotheses(1, m.decode_model(0, 1, 2), o)[0];
  EXPECT_EQ(h.tokens, best.tokens);
  EXPECT_DOUBLE_EQ(h.log_prob, best.log_prob);
  EXPECT_TRUE(h.ended_in_eos);
}

TEST(BeamSearch, StopsEarlyOnlyWhenNothingAliveCanWin) {
  // Beam 2 on the trap: after step 1, "4 eos" (0.36) beats every live prefix (at most 0.15), so
  // the search stops after 2 steps of the 4 allowed.
  const MarkovModel m = greedy_trap();
  DecodeOptions o;
  o.length_penalty = 0;
  o.max_len = 4;
  o.beam = 2;
  int calls = 0;
  beam_search(1, m.decode_model(0, 1, 2, &calls), o);
  EXPECT_EQ(calls, 2);
}

TEST(BeamSearch, LengthPenaltyChangesTheWinner) {
  // after bos: 3 (1.0); after 3: eos (0.5), 4 (0.5); after 4: 0 (0.95), eos (0.05); after 0: eos (0.95), 3 (0.05)
  //   "3 eos":     log 0.5           = -0.693, len 2
  //   "3 4 0 eos": log(0.5*0.95*0.95) = -0.796, len 4
  // alpha 0: -0.693 > -0.796, the short one wins.
  // alpha 1: lp(2) = 7/6, lp(4) = 9/6: -0.594 < -0.531, the long one wins.
  MarkovModel m;
  m.vocab = 5;
  m.tables.push_back(first_order({
      {0, 0, 0.95, 0.05, 0},
      {0, 0, 0, 1.0, 0},
      {0, 0, 1, 0, 0},
      {0, 0, 0.5, 0, 0.5},
      {0.95, 0, 0.05, 0, 0},
  }));
  DecodeOptions o;
  o.beam = 2;
  o.max_len = 6;
  o.length_penalty = 0;
  const DecodedHypothesis short_best = brute_force(m, 0, o);
  EXPECT_EQ(short_best.tokens, (std::vector<int32_t>{3}));
  EXPECT_EQ(beam_search(1, m.decode_model(0, 1, 2), o)[0], short_best.tokens);
  o.length_penalty = 1.0f;
  const DecodedHypothesis long_best = brute_force(m, 0, o);
  EXPECT_EQ(long_best.tokens, (std::vector<int32_t>{3, 4, 0}));
  const DecodedHypothesis h = beam_search_hypotheses(1, m.decode_model(0, 1, 2), o)[0];
  EXPECT_EQ(h.tokens, long_best.tokens);
  EXPECT_DOUBLE_EQ(h.score, long_best.score);
  EXPECT_NEAR(h.score, std::log(0.5 * 0.95 * 0.95) / 1.5, 1e-6);  // float log-probs
}

TEST(BeamSearch, BatchEqualsEachSentenceAlone) {
  MarkovModel m;
  m.vocab = 7;
  for (uint32_t s = 0; s < 5; ++s) m.tables.push_back(random_table(m.vocab, 100 + s, 2.0));
  DecodeOptions o;
  o.beam = 3;
  o.max_len = 7;
  o.length_penalty = 0.6f;
  const std::vector<DecodedHypothesis> together = beam_search_hypotheses(5, m.decode_model(0, 5, 3), o);
  ASSERT_EQ(together.size(), 5u);
  std::vector<std::vector<int32_t>> distinct;
  for (int s = 0; s < 5; ++s) {
    const DecodedHypothesis alone = beam_search_hypotheses(1, m.decode_model(s, 1, 3), o)[0];
    EXPECT_EQ(together[s].tokens, alone.tokens) << "sentence " << s;
    EXPECT_EQ(together[s].score, alone.score) << "sentence " << s;
    // The model's state followed the parents: the reported log-prob is the sequence's own.
    EXPECT_DOUBLE_EQ(together[s].log_prob, m.log_prob(s, together[s].tokens, together[s].ended_in_eos));
    // Never better than the true best, which it finds on these small tables.
    const DecodedHypothesis best = brute_force(m, s, o);
    EXPECT_LE(together[s].score, best.score);
    EXPECT_EQ(together[s].tokens, best.tokens) << "sentence " << s;
    if (std::find(distinct.begin(), distinct.end(), together[s].tokens) == distinct.end())
      distinct.push_back(together[s].tokens);
  }
  EXPECT_GE(distinct.size(), 3u) << "the sentences should have different best sequences";
}

TEST(BeamSearch, MaxLenCutsLiveHypotheses) {
  // eos is nearly impossible (logit -30): every hypothesis runs to max_len and is finished as it is.
  MarkovModel m;
  m.vocab = 5;
  m.tables.push_back(random_table(m.vocab, 7, 1.5, -30.0));
  DecodeOptions o;
  o.beam = 4;
  o.max_len = 3;
  const DecodedHypothesis best = brute_force(m, 0, o);
  const DecodedHypothesis h = beam_search_hypotheses(1, m.decode_model(0, 1, 4), o)[0];
  EXPECT_EQ(h.tokens.size(), 3u);
  EXPECT_FALSE(h.ended_in_eos);
  EXPECT_EQ(h.tokens, best.tokens);
  EXPECT_DOUBLE_EQ(h.score, best.log_prob / gnmt_length_penalty(3, o.length_penalty));
  o.beam = 1;
  EXPECT_EQ(beam_search(1, m.decode_model(0, 1, 1), o)[0].size(), 3u);
  o.max_len = 0;
  EXPECT_TRUE(beam_search(1, m.decode_model(0, 1, 1), o)[0].empty());
}

TEST(BeamSearch, Beam1IsGreedyArgmax) {
  MarkovModel m;
  m.vocab = 6;
  for (uint32_t s = 0; s < 8; ++s) m.tables.push_back(random_table(m.vocab, 500 + s, 1.5, s % 2 ? 1.0 : -1.0));
  DecodeOptions o;
  o.beam = 1;
  o.max_len = 9;
  for (float alpha : {0.0f, 0.6f}) {
    o.length_penalty = alpha;
    const std::vector<std::vector<int32_t>> out = beam_search(8, m.decode_model(0, 8, 1), o);
    for (int s = 0; s < 8; ++s) EXPECT_EQ(out[s], greedy(m, s, o.max_len)) << "sentence " << s << " alpha " << alpha;
  }
}

TEST(BeamSearch, TiesBreakTowardsTheLowerTokenId) {
  // After bos, 3 and 4 are equally likely, each followed by eos for sure: 3 wins at every beam.
  MarkovModel m;
  m.vocab = 5;
  m.tables.push_back(first_order({
      {0, 0, 1, 0, 0}, {0, 0, 0, 0.5, 0.5}, {0, 0, 1, 0, 0}, {0, 0, 1, 0, 0}, {0, 0, 1, 0, 0}}));
  for (int beam : {1, 2, 3}) {
    DecodeOptions o;
    o.beam = beam;
    o.max_len = 4;
    EXPECT_EQ(beam_search(1, m.decode_model(0, 1, beam), o)[0], (std::vector<int32_t>{3})) << "beam " << beam;
  }
}

TEST(BeamSearch, RejectsBadArguments) {
  DecodeModel none;
  none.vocab = 5;
  EXPECT_THROW(beam_search(1, none, {}), std::invalid_argument);  // no step function
  const MarkovModel m = greedy_trap();
  DecodeOptions o;
  o.beam = 0;
  EXPECT_THROW(beam_search(1, m.decode_model(0, 1, 1), o), std::invalid_argument);
  o.beam = 1;
  o.eos = 9;
  EXPECT_THROW(beam_search(1, m.decode_model(0, 1, 1), o), std::invalid_argument);
}

}  // namespace
}  // namespace mlpd
