#include "translation/beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace mlpd {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

struct Slot {
  std::vector<int32_t> tokens;  // generated so far (no bos)
  double log_prob = kNegInf;    // -inf: dead slot
};

struct Candidate {
  double log_prob;
  int32_t token;
  int slot;
};

// Better first: higher log-probability, then lower token id, then lower slot.
bool better(const Candidate& a, const Candidate& b) {
  if (a.log_prob != b.log_prob) return a.log_prob > b.log_prob;
  if (a.token != b.token) return a.token < b.token;
  return a.slot < b.slot;
}

struct Sentence {
  std::vector<Slot> slots;                 // beam of them
  std::vector<DecodedHypothesis> finished; // best first, at most beam of them
  bool done = false;
};

void add_finished(Sentence& s, DecodedHypothesis h, int beam) {
  // After those with a higher or equal score: the first found wins a tie.
  auto it = std::upper_bound(s.finished.begin(), s.finished.end(), h.score,
                             [](double v, const DecodedHypothesis& f) { return v > f.score; });
  s.finished.insert(it, std::move(h));
  if (static_cast<int>(s.finished.size()) > beam) s.finished.pop_back();
}

}  // namespace

double gnmt_length_penalty(int len, float alpha) {
  if (alpha == 0.0f) return 1.0;
  return std::pow((5.0 + len) / 6.0, static_cast<double>(alpha));
}

std::vector<DecodedHypothesis> beam_search_hypotheses(int batch, const DecodeModel& model, const DecodeOptions& opts) {
  const int beam = opts.beam, vocab = model.vocab;
  if (batch < 0 || beam < 1 || vocab < 1 || !model.step || opts.eos < 0 || opts.eos >= vocab || opts.bos < 0 ||
      opts.bos >= vocab)
    throw std::invalid_argument("beam_search: need batch >= 0, beam >= 1, a step function and bos, eos < vocab (batch " +
                                std::to_string(batch) + ", beam " + std::to_string(beam) + ", vocab " +
                                std::to_string(vocab) + ")");
  const int rows = batch * beam;
  std::vector<Sentence> sents(batch);
  for (Sentence& s : sents) {
    s.slots.resize(beam);
    s.slots[0].log_prob = 0.0;  // only slot 0 is live at step 0
  }
  std::vector<int32_t> last(rows, opts.bos), parents(rows);
  for (int r = 0; r < rows; ++r) parents[r] = r;
  std::vector<float> log_probs(static_cast<size_t>(rows) * vocab);
  const double best_lp = gnmt_length_penalty(opts.max_len, opts.length_penalty);  // the largest divisor
  // Candidates kept per step: 2 * beam so that eos finishing does not shrink the beam; greedy keeps
  // only the argmax.
  const size_t keep = beam == 1 ? 1 : 2 * static_cast<size_t>(beam);
  std::vector<Candidate> cands;
  int remaining = batch;

  for (int step = 0; step < opts.max_len && remaining > 0; ++step) {
    model.step(step, last.data(), parents.data(), rows, log_probs.data());
    const bool last_step = step + 1 == opts.max_len;
    for (int b = 0; b < batch; ++b) {
      Sentence& s = sents[b];
      const int base = b * beam;
      if (s.done) {
        for (int k = 0; k < beam; ++k) last[base + k] = opts.eos, parents[base + k] = base + k;
        continue;
      }
      // The best `keep` candidates over the live slots.
      cands.clear();
      for (int k = 0; k < beam; ++k) {
        const Slot& sl = s.slots[k];
        if (sl.log_prob == kNegInf) continue;
        const float* lp = log_probs.data() + static_cast<size_t>(base + k) * vocab;
        for (int32_t v = 0; v < vocab; ++v) {
          const double x = std::isnan(lp[v]) ? kNegInf : static_cast<double>(lp[v]);
          if (x == kNegInf) continue;
          cands.push_back({sl.log_prob + x, v, k});
        }
      }
      const size_t n = std::min(keep, cands.size());
      std::partial_sort(cands.begin(), cands.begin() + static_cast<std::ptrdiff_t>(n), cands.end(), better);
      cands.resize(n);

      std::vector<Slot> next(beam);
      std::vector<int> from(beam, -1);
      int live = 0;
      for (const Candidate& c : cands) {
        const Slot& src = s.slots[c.slot];
        if (c.token == opts.eos) {
          const int len = static_cast<int>(src.tokens.size()) + 1;
          add_finished(s, {src.tokens, c.log_prob, c.log_prob / gnmt_length_penalty(len, opts.length_penalty), true},
                       beam);
        } else if (live < beam) {
          next[live].tokens = src.tokens;
          next[live].tokens.push_back(c.token);
          next[live].log_prob = c.log_prob;
          from[live] = c.slot;
          ++live;
        }
      }
      s.slots = std::move(next);
      if (last_step) {  // cut at max_len: the live ones finish as they are
        for (const Slot& sl : s.slots) {
          if (sl.log_prob == kNegInf) continue;
          add_finished(s, {sl.tokens, sl.log_prob, sl.log_prob / best_lp, false}, beam);
        }
      }
      // Done when `beam` have finished and none alive can beat the best (greedy: at its eos).
      double live_bound = kNegInf;
      for (const Slot& sl : s.slots) live_bound = std::max(live_bound, sl.log_prob / best_lp);
      const bool full = static_cast<int>(s.finished.size()) >= beam;
      if (last_step || live == 0 || (full && s.finished.front().score >= live_bound)) {
        s.done = true;
        --remaining;
      }
      for (int k = 0; k < beam; ++k) {
        const bool alive = !s.done && from[k] >= 0;
        last[base + k] = alive ? s.slots[k].tokens.back() : opts.eos;
        parents[base + k] = alive ? base + from[k] : base + k;
      }
    }
  }

  std::vector<DecodedHypothesis> out(batch);
  for (int b = 0; b < batch; ++b) {
    if (!sents[b].finished.empty()) out[b] = std::move(sents[b].finished.front());
  }
  return out;
}

std::vector<std::vector<int32_t>> beam_search(int batch, const DecodeModel& model, const DecodeOptions& opts) {
  std::vector<std::vector<int32_t>> out;
  out.reserve(batch);
  for (DecodedHypothesis& h : beam_search_hypotheses(batch, model, opts)) out.push_back(std::move(h.tokens));
  return out;
}

}  // namespace mlpd
