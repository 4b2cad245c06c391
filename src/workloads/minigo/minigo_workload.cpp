// The minigo workload: generations of self-play, then data-parallel training on positions sampled
// from the last `window_size` generations, then an evaluation against a fixed reference opponent
// (its win rate is the metric) and a few games against GNU Go (a strength figure). Every rank plays
// its share of each generation's games; the records are exchanged so that every rank holds the
// same window and samples the same global batch, of which it trains its slice.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <vector>

#include <boost/serialization/vector.hpp>
#include <spdlog/spdlog.h>

#include "core/arena.h"
#include "core/check.h"
#include "core/rng.h"
#include "core/serialize.h"
#include "kernels/device.h"
#include "minigo/features.h"
#include "minigo/match.h"
#include "minigo/selfplay.h"
#include "mlperf/keys.h"
#include "workloads/minigo/minigo_config.h"
#include "workloads/minigo/minigo_model.h"
#include "workloads/minigo/minigo_rules.h"
#include "workloads/batch_split.h"
#include "workloads/registry.h"

namespace mlpd {

namespace {

constexpr uint64_t kSelfPlayStream = 0x5345'4C46'0000ull;
constexpr uint64_t kSampleStream = 0x5341'4D50'0000ull;
constexpr uint64_t kEvalStream = 0x4556'414C'0000ull;
constexpr uint64_t kSymmetryStream = 0x5359'4D4D'0000ull;

// One evaluation game as it travels to rank 0.
struct EvalGameRecord {
  int32_t index = 0;
  int8_t opponent = 0;  // 0 the reference, 1 GNU Go, 2 the random player
  int8_t net_black = 0;
  int8_t net_won = 0;
  double net_margin = 0;  // area margin from the network's side; a resignation counts size*size
  int32_t moves = 0;
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    ar & index & opponent & net_black & net_won & net_margin & moves;
  }
};

using Clock = std::chrono::steady_clock;

struct MinigoWorkload final : Workload {
  MinigoConfig cfg;
  MinigoNetSpec spec;
  std::unique_ptr<MinigoNet> net;
  Arena arena;
  Device device = Device::cpu;
  const OpTable* ops = &cpu_ops();
  int rank = 0, ranks = 1;
  int span = 0;           // positions per forward (the batch-norm span)
  int micro_batches = 1;  // forwards per rank per step
  // The last window_size generations' games (what a checkpoint carries) and their positions (what
  // training samples from), the same on every rank.
  std::deque<std::vector<GameRecord>> window_games;
  std::deque<std::vector<TrainingExample>> window;
  // Training batch: host inputs and targets, their device copies, the loss gradients.
  std::vector<float> x, target_policy, target_value;
  DeviceBytes policy_dev = no_device_bytes(), value_dev = no_device_bytes();
  DeviceBytes dpolicy = no_device_bytes(), dvalue = no_device_bytes();
  StepLoss step_loss;
  std::vector<float> eval_logits, eval_values;
  TrainingExample sym;

  void init_parameters(uint64_t seed) override { init_minigo_net(*net, store, seed); }
  int64_t steps_in_epoch(int epoch) override { return epoch >= 0 ? cfg.steps_per_generation : 0; }
  StepStats train_step(int epoch, int64_t step, GradReady ready) override;
  EvalPartial evaluate() override;
  EvalOutcome finish_evaluation(const EvalCombined& c) override;
  bool has_own_driver() const override { return true; }
  void drive(LoopServices& loop) override;
  std::string save_state() const override {
    return to_bytes(std::vector<std::vector<GameRecord>>(window_games.begin(), window_games.end()));
  }
  void load_state(const std::string& bytes) override;
  void add_generation(std::vector<GameRecord> games);

  size_t net_input_floats() const { return size_t(cfg.board_size) * size_t(cfg.board_size) * kFeaturePlanes; }
  MctsEvaluator net_evaluator();
  void self_play(int generation, LoopServices& loop);
};

// The network as MCTS sees it: probabilities (softmax of the policy logits) and tanh values, from
// a forward in inference mode (batch-norm running statistics).
MctsEvaluator MinigoWorkload::net_evaluator() {
  return [this](int n, const float* features, float* policy, float* value) {
    const int moves = spec.moves();
    for (int off = 0; off < n; off += spec.max_batch) {
      const int k = std::min(spec.max_batch, n - off);
      arena_reset(arena);
      const MinigoOutputs o = minigo_forward(*net, store, arena, features + size_t(off) * net_input_floats(), k, false);
      eval_logits.resize(size_t(k) * moves);
      eval_values.resize(size_t(k));
      copy_to_host(device, eval_logits.data(), o.policy, sizeof(float) * eval_logits.size());
      copy_to_host(device, eval_values.data(), o.value, sizeof(float) * eval_values.size());
      for (int i = 0; i < k; ++i) {
        const float* l = &eval_logits[size_t(i) * moves];
        float* p = policy + size_t(off + i) * moves;
        const float mx = *std::max_element(l, l + moves);
        double sum = 0;
        for (int m = 0; m < moves; ++m) sum += (p[m] = std::exp(l[m] - mx));
        for (int m = 0; m < moves; ++m) p[m] = float(p[m] / sum);
        value[off + i] = std::tanh(eval_values[size_t(i)]);
      }
    }
  };
}

// This rank's games of the generation (game i on rank i mod ranks), then everyone's, in game
// order: the window gets the same examples on every rank.
void MinigoWorkload::self_play(int generation, LoopServices& loop) {
  const uint64_t seed = rng_u64(cfg.seed, kSelfPlayStream, uint64_t(generation));
  const MctsEvaluator eval = net_evaluator();
  std::vector<GameRecord> mine;
  const auto t0 = Clock::now();
  auto last = t0;
  const int my_games = (cfg.games_per_generation - rank + ranks - 1) / ranks;
  for (int i = rank; i < cfg.games_per_generation; i += ranks) {
    mine.push_back(self_play_game(eval, cfg.selfplay, cfg.board_size, cfg.komi, seed, uint64_t(i)));
    if (rank == 0 && std::chrono::duration<double>(Clock::now() - last).count() >= 10.0) {
      spdlog::info("generation {} self-play: {}/{} games on rank 0", generation, mine.size(), my_games);
      last = Clock::now();
    }
  }
  const std::vector<std::string> all = loop.exchange_records(to_bytes(mine));
  std::vector<std::vector<GameRecord>> by_rank;
  for (const std::string& bytes : all) by_rank.push_back(from_bytes<std::vector<GameRecord>>(bytes));
  std::vector<GameRecord> games;
  int black_wins = 0, resigned = 0;
  size_t moves = 0;
  for (int i = 0; i < cfg.games_per_generation; ++i) {
    GameRecord& g = by_rank[size_t(i % ranks)][size_t(i / ranks)];
    black_wins += g.game.result[0] == 'B';
    resigned += g.game.result.find("+R") != std::string::npos;
    moves += g.game.moves.size();
    games.push_back(std::move(g));
  }
  add_generation(std::move(games));
  loop.log_event(keys::kActualSelfplayGamesPerGeneration, cfg.games_per_generation, {{keys::kEpochNum, generation}});
  if (rank == 0)
    spdlog::info("generation {} self-play: {} games in {:.1f} s | {:.1f} moves/game | black won {} | {} resigned",
                 generation, cfg.games_per_generation, std::chrono::duration<double>(Clock::now() - t0).count(),
                 double(moves) / cfg.games_per_generation, black_wins, resigned);
}

StepStats MinigoWorkload::train_step(int epoch, int64_t step, GradReady ready) {
  MLPD_CHECK(!window.empty(), "minigo: a training step before any self-play");
  size_t total = 0;
  for (const auto& g : window) total += g.size();
  const int moves = spec.moves();
  const size_t in = net_input_floats();
  const float scale = 1.0f / float(facts.global_batch);
  StepStats st;
  double* loss = begin_step_loss(step_loss);
  st.loss = &step_loss;
  for (int mb = 0; mb < micro_batches; ++mb) {
    // Micro-batch mb of rank r is "virtual rank" r*M+mb, as in resnet and ssd: the positions and
    // batch-norm groups of 2 ranks are those of 1 rank with 2 micro-batches.
    const int64_t first = int64_t(rank * micro_batches + mb) * span;
    for (int i = 0; i < span; ++i) {
      const uint64_t counter = uint64_t(step) * uint64_t(facts.global_batch) + uint64_t(first + i);
      size_t j = rng_below(cfg.seed, kSampleStream + uint64_t(epoch), counter, total);
      size_t gen = 0;
      while (j >= window[gen].size()) j -= window[gen++].size();
      const int s = static_cast<int>(rng_below(cfg.seed, kSymmetryStream + uint64_t(epoch), counter, 8));
      apply_symmetry(s, cfg.board_size, window[gen][j], sym);
      std::copy(sym.features.begin(), sym.features.end(), x.begin() + ptrdiff_t(in * size_t(i)));
      std::copy(sym.policy.begin(), sym.policy.end(), target_policy.begin() + ptrdiff_t(size_t(moves) * size_t(i)));
      target_value[size_t(i)] = sym.outcome;
    }
    arena_reset(arena);
    const MinigoOutputs o = minigo_forward(*net, store, arena, x.data(), span, true);
    const float* tp = visible_on(device, target_policy.data(), as<float>(policy_dev), target_policy.size());
    const float* tv = visible_on(device, target_value.data(), as<float>(value_dev), target_value.size());
    ops->softmax_xent_soft(o.policy, tp, span, moves, scale, as<float>(dpolicy), loss, arena);
    ops->tanh_mse(o.value, tv, span, scale, as<float>(dvalue), loss, arena);
    st.loss_weight += span;
    st.work += span;
    const bool last = mb + 1 == micro_batches;
    minigo_backward(*net, store, arena, as<float>(dpolicy), as<float>(dvalue), span, [&ready, last](size_t v) {
      if (last) ready(v);
    });
  }
  return st;
}

EvalPartial MinigoWorkload::evaluate() {
  const uint64_t seed = rng_u64(cfg.seed, kEvalStream, 0);  // the same openings every evaluation
  MctsConfig net_cfg = cfg.selfplay.mcts, ref_cfg = cfg.selfplay.mcts;
  net_cfg.simulations = cfg.eval_readouts;
  ref_cfg.simulations = cfg.reference_readouts;
  const int opening = 4;  // two moves a side drawn by visits: the games differ
  GoPlayer me = mcts_player("minigo", net_evaluator(), net_cfg, opening);
  GoPlayer reference = mcts_player("rollout-mcts", rollout_evaluator(cfg.board_size, cfg.komi, 1, seed), ref_cfg, opening);
  GoPlayer random = random_player();
  std::vector<EvalGameRecord> out;
  const int max_moves = cfg.selfplay.max_moves;
  auto play = [&](GoPlayer& opp, int i, int opponent) {
    const bool net_black = i % 2 == 0;
    const MatchGame m = net_black ? play_match_game(me, opp, cfg.board_size, cfg.komi, max_moves, rng_u64(seed, uint64_t(opponent), uint64_t(i)))
                                  : play_match_game(opp, me, cfg.board_size, cfg.komi, max_moves, rng_u64(seed, uint64_t(opponent), uint64_t(i)));
    EvalGameRecord r;
    r.index = i;
    r.opponent = int8_t(opponent);
    r.net_black = net_black;
    const bool black_won = m.game.result[0] == 'B';
    r.net_won = m.game.result != "0" && black_won == net_black;
    const double black_margin = m.game.result.find("+R") != std::string::npos
                                    ? (black_won ? 1.0 : -1.0) * cfg.board_size * cfg.board_size
                                    : m.black_margin;
    r.net_margin = net_black ? black_margin : -black_margin;
    r.moves = int(m.game.moves.size());
    out.push_back(r);
  };
  for (int i = rank; i < cfg.eval_games; i += ranks) play(reference, i, 0);
  for (int i = rank; i < cfg.eval_games; i += ranks) play(random, i, 2);
  if (cfg.gnugo_games > 0) {
    GoPlayer gnugo = gnugo_player(cfg.gnugo_level, cfg.komi, cfg.board_size);
    for (int i = rank; i < cfg.gnugo_games; i += ranks) play(gnugo, i, 1);
  }
  EvalPartial p;
  p.records = to_bytes(out);
  return p;
}

EvalOutcome MinigoWorkload::finish_evaluation(const EvalCombined& c) {
  double wins[3] = {0, 0, 0}, games[3] = {0, 0, 0}, g_margin = 0;
  for (const std::string& bytes : c.records_by_rank)
    for (const EvalGameRecord& r : from_bytes<std::vector<EvalGameRecord>>(bytes)) {
      MLPD_CHECK(r.opponent >= 0 && r.opponent < 3, "evaluation record with an unknown opponent");
      wins[r.opponent] += r.net_won;
      games[r.opponent] += 1;
      if (r.opponent == 1) g_margin += r.net_margin;
    }
  MLPD_CHECK(games[0] == cfg.eval_games && games[2] == cfg.eval_games && games[1] == std::max(0, cfg.gnugo_games),
             "evaluation games missing from the gather");
  const double g = std::max(1.0, games[1]);
  return {wins[0] / games[0], {wins[2] / games[2], wins[1] / g, g_margin / g}, games[0]};
}

void MinigoWorkload::add_generation(std::vector<GameRecord> games) {
  std::vector<TrainingExample> examples;
  for (const GameRecord& g : games)
    for (TrainingExample& e : training_examples(g)) examples.push_back(std::move(e));
  window_games.push_back(std::move(games));
  window.push_back(std::move(examples));
  while (int(window.size()) > cfg.window_generations) {
    window_games.pop_front();
    window.pop_front();
  }
}

// The window's positions are a function of its games: a checkpoint carries only the games.
void MinigoWorkload::load_state(const std::string& bytes) {
  window_games.clear();
  window.clear();
  for (std::vector<GameRecord>& games : from_bytes<std::vector<std::vector<GameRecord>>>(bytes))
    add_generation(std::move(games));
}

// Generation g: self-play with the current network, training on the window, evaluation. A run
// resumed within generation g has its games in the restored window and continues its training.
void MinigoWorkload::drive(LoopServices& loop) {
  const ResumePoint from = loop.resume_point();
  for (int g = from.epoch; g <= loop.max_epochs() && !loop.stopped(); ++g) {
    const int64_t first_step = g == from.epoch ? from.step_in_epoch : 0;
    loop.begin_epoch(g);
    if (first_step == 0) self_play(g, loop);
    for (int64_t s = first_step; s < steps_in_epoch(g - 1); ++s)
      if (!loop.train_step(g, s)) break;
    loop.checkpoint_if_stopped_early();  // before the batch-norm statistics are averaged
    loop.average_model_state();          // one model on every rank: the next generation's players
    loop.log_event(keys::kSaveModel, nlohmann::json{{"iteration", g}}, {{keys::kEpochNum, g}});
    loop.end_epoch(g);
    if (loop.evaluate(g)) break;
    loop.checkpoint_at_epoch_end(g);
  }
}

}  // namespace

std::unique_ptr<Workload> make_minigo_workload(const WorkloadContext& ctx, const nlohmann::json& config) {
  auto w = std::make_unique<MinigoWorkload>();
  MinigoWorkload& s = *w;
  s.cfg = read_minigo_config(config);
  s.rank = ctx.rank;
  s.ranks = ctx.ranks;
  WorkloadFacts& f = s.facts;
  f.work_unit = "positions";
  f.eval_kind = EvalKind::Records;
  f.global_batch = s.cfg.global_batch;
  const BatchSplit split = split_rank_batch(f.global_batch, ctx.ranks, config.at(keys::kModelBnSpan).get<int64_t>());
  s.span = split.span;
  s.micro_batches = split.micro_batches;
  f.bn_span = split.span;
  f.steps_per_epoch = s.cfg.steps_per_generation;
  f.train_samples = s.cfg.games_per_generation;  // games per generation: minigo's "epoch" of data
  f.eval_samples = s.cfg.eval_games;

  MinigoNetSpec& spec = s.spec;
  spec.board = s.cfg.board_size;
  spec.planes = kFeaturePlanes;
  spec.channels = s.cfg.tower_channels;
  spec.blocks = s.cfg.tower_blocks;
  spec.value_hidden = s.cfg.value_hidden;
  spec.max_batch = std::max(s.span, s.cfg.selfplay.mcts.virtual_losses);
  spec.bn_momentum = s.cfg.bn_momentum;
  spec.device = ctx.device;
  spec.precision = ctx.precision;
  s.device = ctx.device;
  s.step_loss = make_step_loss(ctx.device, 1);
  s.ops = &ops_for(ctx.device, ctx.precision);
  s.net = build_minigo_net(spec, s.store);
  finalize_params(s.store);
  f.model_summary = minigo_summary(*s.net);
  f.flops_per_sample = 3.0 * minigo_flops_per_position(*s.net);
  const size_t moves = size_t(spec.moves());
  arena_init_on(ctx.device, s.arena,
                minigo_arena_bytes(*s.net, spec.max_batch) + s.ops->minigo_loss_scratch_floats(s.span) * sizeof(float) + 4096);
  f.activation_bytes = int64_t(minigo_activation_bytes(*s.net));
  f.scratch_bytes = int64_t(s.arena.capacity);
  s.x.assign(size_t(s.span) * s.net_input_floats(), 0.0f);
  s.target_policy.assign(size_t(s.span) * moves, 0.0f);
  s.target_value.assign(size_t(s.span), 0.0f);
  s.policy_dev = alloc_on(ctx.device, sizeof(float) * s.target_policy.size());
  s.value_dev = alloc_on(ctx.device, sizeof(float) * s.target_value.size());
  s.dpolicy = alloc_on(ctx.device, sizeof(float) * s.target_policy.size());
  s.dvalue = alloc_on(ctx.device, sizeof(float) * s.target_value.size());

  // MiniGo's log keys (closed_minigo.yaml and the v0.7 reference): the schedule as step boundaries
  // and rates, the games per generation and its minimum from the rules table, the search.
  const auto boundaries = config.at(keys::kOptLearningRateDecayBoundaryEpochs).get<std::vector<double>>();
  const double base = config.at(keys::kOptBaseLearningRate).get<double>();
  const double factor = config.at(keys::kOptLearningRateDecayFactor).get<double>();
  nlohmann::json lr_boundaries = nlohmann::json::array(), lr_rates = {base};
  for (size_t i = 0; i < boundaries.size(); ++i) {
    lr_boundaries.push_back(std::llround(boundaries[i] * double(s.cfg.steps_per_generation)));
    lr_rates.push_back(base * std::pow(factor, double(i + 1)));
  }
  f.logged_params = {
      {keys::kTrainBatchSize, f.global_batch, nullptr},
      {keys::kLrBoundaries, lr_boundaries, nullptr},
      {keys::kLrRates, lr_rates, nullptr},
      {keys::kMinSelfplayGamesPerGeneration, minigo_min_games(ctx.scale), nullptr},
      {keys::kNumReadouts, s.cfg.selfplay.mcts.simulations, nullptr},
      {keys::kVirtualLosses, s.cfg.selfplay.mcts.virtual_losses, nullptr},
      {keys::kWindowSize, s.cfg.window_generations, nullptr},
      {keys::kEvalGames, s.cfg.eval_games, nullptr},
      {keys::kResignThreshold, -s.cfg.selfplay.resign_threshold, nullptr},
      {keys::kDisableResignPct, s.cfg.selfplay.no_resign_fraction, nullptr},
  };
  return w;
}

}  // namespace mlpd
