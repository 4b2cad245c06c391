#include "minigo/mcts.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/check.h"
#include "core/rng.h"
#include "minigo/features.h"

namespace mlpd {

namespace {

constexpr uint64_t kNoiseStream = 0x4449'5249'4348'0000ull;  // "DIRICH"

struct Node {
  GoBoard board;                // the position at this node
  int parent = -1;
  int move = -1;                // the move from the parent
  bool expanded = false;
  bool terminal = false;
  std::vector<int> children;    // node indices, by move (-1: not created)
  std::vector<float> prior;     // [moves], 0 for illegal moves
  std::vector<int> visits;      // [moves]
  std::vector<float> value_sum; // [moves], from this node's side to move
  std::vector<int> virtual_loss;
  int total_visits = 0;
};

}  // namespace

struct MctsTree {
  std::vector<Node> nodes;
  std::vector<std::vector<int8_t>> earlier;  // before the root, most recent first
  int moves = 0;
  bool respect_own_eyes = false;  // MctsConfig::respect_own_eyes of the search
};

std::unique_ptr<MctsTree> mcts_new(const GoBoard& root, std::vector<std::vector<int8_t>> earlier) {
  auto t = std::make_unique<MctsTree>();
  t->moves = root.size * root.size + 1;
  Node n;
  n.board = root;
  n.terminal = game_over(root);
  t->nodes.push_back(std::move(n));
  t->earlier = std::move(earlier);
  return t;
}

namespace {

void features_of(const MctsTree& t, int node, float* out) {
  std::vector<const std::vector<int8_t>*> positions;
  for (int n = node; n >= 0 && int(positions.size()) < kFeatureHistory; n = t.nodes[size_t(n)].parent)
    positions.push_back(&t.nodes[size_t(n)].board.stones);
  for (size_t i = 0; i < t.earlier.size() && int(positions.size()) < kFeatureHistory; ++i)
    positions.push_back(&t.earlier[i]);
  const GoBoard& b = t.nodes[size_t(node)].board;
  board_features(positions, b.size, b.to_play, out);
}

// PUCT: Q + c * P * sqrt(N) / (1 + n), Q counting virtual losses as losses; unvisited Q = 0.
int select_move(const Node& n, float c_puct) {
  const float sq = std::sqrt(float(std::max(1, n.total_visits)));
  int best = -1;
  float best_score = -1e30f;
  for (size_t m = 0; m < n.prior.size(); ++m) {
    if (n.prior[m] <= 0.0f) continue;
    const int visits = n.visits[m] + n.virtual_loss[m];
    const float q = visits > 0 ? (n.value_sum[m] - float(n.virtual_loss[m])) / float(visits) : 0.0f;
    const float u = c_puct * n.prior[m] * sq / float(1 + visits);
    if (q + u > best_score) {
      best_score = q + u;
      best = int(m);
    }
  }
  return best;
}

// Walks down from the root to a leaf (a node not yet expanded, or the end of the game), adding a
// virtual loss along the path; returns the leaf.
int descend(MctsTree& t, float c_puct) {
  int cur = 0;
  for (;;) {
    Node& n = t.nodes[size_t(cur)];
    if (!n.expanded || n.terminal) return cur;
    const int m = select_move(n, c_puct);
    MLPD_CHECK(m >= 0, "mcts: a position without a legal move (the pass is always legal)");
    ++n.virtual_loss[size_t(m)];
    if (n.children[size_t(m)] < 0) {
      Node child;
      child.board = n.board;
      play(child.board, m);
      child.parent = cur;
      child.move = m;
      child.terminal = game_over(child.board);
      const int id = int(t.nodes.size());
      t.nodes[size_t(cur)].children[size_t(m)] = id;  // n may move when nodes grows
      t.nodes.push_back(std::move(child));
      return id;
    }
    cur = n.children[size_t(m)];
  }
}

void expand(MctsTree& t, int id, const float* policy) {
  Node& n = t.nodes[size_t(id)];
  if (n.expanded) return;
  n.children.assign(size_t(t.moves), -1);
  n.prior.assign(size_t(t.moves), 0.0f);
  n.visits.assign(size_t(t.moves), 0);
  n.value_sum.assign(size_t(t.moves), 0.0f);
  n.virtual_loss.assign(size_t(t.moves), 0);
  double sum = 0;
  bool any_move = false;  // a legal move other than the pass that is searched
  const int pass = t.moves - 1;
  for (int m = 0; m < t.moves; ++m) {
    if (!is_legal(n.board, m)) continue;
    if (t.respect_own_eyes && m != pass && is_eye_like(n.board, m, n.board.to_play)) continue;
    if (t.respect_own_eyes && m == pass && any_move) continue;
    any_move = any_move || m != pass;
    n.prior[size_t(m)] = std::max(policy[m], 1e-6f);
    sum += n.prior[size_t(m)];
  }
  for (float& p : n.prior) p = float(p / sum);
  n.expanded = true;
}

// value: for the side to move at the leaf. Each edge on the path gets it from its parent's side.
void backup(MctsTree& t, int leaf, float value) {
  int cur = leaf;
  float v = value;
  while (t.nodes[size_t(cur)].parent >= 0) {
    const int parent = t.nodes[size_t(cur)].parent;
    const int m = t.nodes[size_t(cur)].move;
    Node& p = t.nodes[size_t(parent)];
    v = -v;  // the parent's side to move is the other one
    --p.virtual_loss[size_t(m)];
    ++p.visits[size_t(m)];
    ++p.total_visits;
    p.value_sum[size_t(m)] += v;
    cur = parent;
  }
}

void remove_virtual_loss(MctsTree& t, int leaf) {
  for (int cur = leaf; t.nodes[size_t(cur)].parent >= 0; cur = t.nodes[size_t(cur)].parent)
    --t.nodes[size_t(t.nodes[size_t(cur)].parent)].virtual_loss[size_t(t.nodes[size_t(cur)].move)];
}

void add_noise(Node& root, float alpha, float fraction, uint64_t seed) {
  std::mt19937_64 gen(rng_u64(seed, kNoiseStream, uint64_t(root.board.moves)));
  std::gamma_distribution<float> gamma(alpha, 1.0f);
  std::vector<float> eta(root.prior.size(), 0.0f);
  float sum = 0;
  for (size_t m = 0; m < eta.size(); ++m)
    if (root.prior[m] > 0) sum += eta[m] = gamma(gen);
  if (sum <= 0) return;
  for (size_t m = 0; m < eta.size(); ++m)
    if (root.prior[m] > 0) root.prior[m] = (1 - fraction) * root.prior[m] + fraction * eta[m] / sum;
}

float terminal_value(const GoBoard& b) {
  // The game is over: the winner by area with MiniGo's komi, from the side to move.
  const double score = tromp_taylor_score(b, 7.5);
  const float black_wins = score > 0 ? 1.0f : -1.0f;
  return b.to_play == kBlack ? black_wins : -black_wins;
}

}  // namespace

void mcts_search(MctsTree& t, const MctsConfig& cfg, const MctsEvaluator& eval, bool noise, uint64_t seed) {
  t.respect_own_eyes = cfg.respect_own_eyes;
  const GoBoard& rb = t.nodes[0].board;
  const size_t plane = size_t(rb.size) * rb.size * kFeaturePlanes;
  std::vector<float> feats, policy, value;
  if (!t.nodes[0].expanded && !t.nodes[0].terminal) {
    feats.resize(plane);
    policy.resize(size_t(t.moves));
    value.resize(1);
    features_of(t, 0, feats.data());
    eval(1, feats.data(), policy.data(), value.data());
    expand(t, 0, policy.data());
    if (noise) add_noise(t.nodes[0], cfg.dirichlet_alpha, cfg.noise_fraction, seed);
  }
  int done = 0;
  const int batch = std::max(1, cfg.virtual_losses);
  while (done < cfg.simulations) {
    std::vector<int> leaves;
    for (int i = 0; i < batch && done + int(leaves.size()) < cfg.simulations; ++i) {
      const int leaf = descend(t, cfg.c_puct);
      if (t.nodes[size_t(leaf)].terminal) {
        backup(t, leaf, terminal_value(t.nodes[size_t(leaf)].board));
        ++done;
        continue;
      }
      if (std::find(leaves.begin(), leaves.end(), leaf) != leaves.end()) {
        remove_virtual_loss(t, leaf);  // the same leaf twice: evaluate the batch so far first
        break;
      }
      leaves.push_back(leaf);
    }
    if (leaves.empty()) continue;
    const int n = int(leaves.size());
    feats.assign(plane * size_t(n), 0.0f);
    policy.assign(size_t(n) * t.moves, 0.0f);
    value.assign(size_t(n), 0.0f);
    for (int i = 0; i < n; ++i) features_of(t, leaves[size_t(i)], feats.data() + plane * size_t(i));
    eval(n, feats.data(), policy.data(), value.data());
    for (int i = 0; i < n; ++i) {
      expand(t, leaves[size_t(i)], policy.data() + size_t(i) * t.moves);
      backup(t, leaves[size_t(i)], value[size_t(i)]);
    }
    done += n;
  }
}

std::vector<int> mcts_root_visits(const MctsTree& t) {
  const Node& r = t.nodes[0];
  return r.expanded ? r.visits : std::vector<int>(size_t(t.moves), 0);
}

float mcts_root_value(const MctsTree& t) {
  const Node& r = t.nodes[0];
  if (r.total_visits == 0) return 0.0f;
  float s = 0;
  for (float v : r.value_sum) s += v;
  return s / float(r.total_visits);
}

int mcts_choose(const std::vector<int>& visits, bool proportional, uint64_t seed, uint64_t counter) {
  if (!proportional) {
    // Ties broken at random: with fewer simulations than moves many children have one visit each,
    // and the lowest index would always win (the top row of the board, self-play after self-play).
    const int most = *std::max_element(visits.begin(), visits.end());
    const auto tied = uint64_t(std::count(visits.begin(), visits.end(), most));
    uint64_t pick = tied > 1 ? rng_below(seed, 0x5449'4553ull, counter, tied) : 0;
    for (size_t m = 0; m < visits.size(); ++m)
      if (visits[m] == most && pick-- == 0) return int(m);
  }
  long total = 0;
  for (int v : visits) total += v;
  if (total == 0) return int(visits.size()) - 1;
  uint64_t pick = rng_below(seed, 0x43484F4F5345ull, counter, uint64_t(total));
  for (size_t m = 0; m < visits.size(); ++m) {
    if (pick < uint64_t(visits[m])) return int(m);
    pick -= uint64_t(visits[m]);
  }
  return int(visits.size()) - 1;
}

}  // namespace mlpd

void std::default_delete<mlpd::MctsTree>::operator()(mlpd::MctsTree* p) const { delete p; }
