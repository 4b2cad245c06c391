#include <boost/serialization/vector.hpp>
#include <cmath>

#include "core/check.h"
#include "core/rng.h"
#include "core/serialize.h"
#include "mlperf/keys.h"
#include "tests/workloads/tiny/tiny.h"

namespace mlpd {

namespace {

constexpr int kClasses = 3;
constexpr int kDims = 4;
constexpr uint64_t kTrainStream = 0x7469'6e79'0000'0000ull;  // "tiny" + generation
constexpr uint64_t kEvalStream = 0x7465'7374'0000'0000ull;

// One evaluated sample: what rank 0 needs to score the whole eval set.
struct EvalRecord {
  int64_t id = 0;
  int32_t predicted = 0;
  int32_t label = 0;
  float confidence = 0.0f;
  template <class Archive>
  void serialize(Archive& ar, unsigned /*version*/) {
    ar & id & predicted & label & confidence;
  }
};

struct TinyWorkload final : Workload {
  int rank = 0, ranks = 1;
  uint64_t seed = 0;
  float noise = 1.0f;
  size_t w_view = 0, b_view = 0;
  StepLoss step_loss = make_step_loss(Device::cpu, 1);
  float x[kDims] = {}, p[kClasses] = {};

  // Sample `i` of a stream: label i % K, features at the label's centre plus Gaussian noise.
  int sample(uint64_t stream, int64_t i) {
    const int label = static_cast<int>(i % kClasses);
    Rng r{seed, stream, static_cast<uint64_t>(i) * 16};
    for (int d = 0; d < kDims; ++d) x[d] = (d == label ? 2.0f : 0.0f) + noise * r.normal();
    return label;
  }
  void softmax_of_x() {
    const float* w = param_ptr(store, w_view);
    const float* b = param_ptr(store, b_view);
    float mx = -1e30f;
    for (int k = 0; k < kClasses; ++k) {
      p[k] = b[k];
      for (int d = 0; d < kDims; ++d) p[k] += w[k * kDims + d] * x[d];
      mx = std::max(mx, p[k]);
    }
    float z = 0.0f;
    for (float& v : p) z += (v = std::exp(v - mx));
    for (float& v : p) v /= z;
  }
  // Batches vary: 48, 64, 80 samples in turn.
  static int64_t batch_of(int64_t step) { return 48 + 16 * (step % 3); }

  void init_parameters(uint64_t init_seed) override {
    Rng r{init_seed, 1, 0};
    for (float& v : store.params) v = 0.01f * r.normal();
  }

  StepStats train_step(int epoch, int64_t step, GradReady ready) override {
    int64_t first = 0;
    for (int64_t s = 0; s < step; ++s) first += batch_of(s);
    const int64_t n = batch_of(step);
    const int64_t begin = n * rank / ranks, end = n * (rank + 1) / ranks;
    float* gw = grad_ptr(store, w_view);
    float* gb = grad_ptr(store, b_view);
    StepStats st;
    double* loss = begin_step_loss(step_loss);
    st.loss = &step_loss;
    for (int64_t i = begin; i < end; ++i) {
      const int label = sample(kTrainStream + static_cast<uint64_t>(epoch), first + i);
      softmax_of_x();
      *loss -= std::log(std::max(p[label], 1e-30f));
      for (int k = 0; k < kClasses; ++k) {
        const float g = (p[k] - (k == label ? 1.0f : 0.0f)) / static_cast<float>(n);
        gb[k] += g;
        for (int d = 0; d < kDims; ++d) gw[k * kDims + d] += g * x[d];
      }
    }
    st.loss_weight = static_cast<double>(end - begin);
    st.work = st.loss_weight;
    ready(b_view);
    ready(w_view);
    return st;
  }

  EvalPartial evaluate() override {
    std::vector<EvalRecord> recs;
    const int64_t begin = kTinyEvalSamples * rank / ranks, end = kTinyEvalSamples * (rank + 1) / ranks;
    for (int64_t i = begin; i < end; ++i) {
      EvalRecord r;
      r.id = i;
      r.label = sample(kEvalStream, i);
      softmax_of_x();
      r.predicted = static_cast<int32_t>(std::max_element(p, p + kClasses) - p);
      r.confidence = p[r.predicted];
      recs.push_back(r);
    }
    return {{}, to_bytes(recs)};
  }

  // Rank 0: every eval sample exactly once, else the gather lost or doubled records.
  EvalOutcome finish_evaluation(const EvalCombined& c) override {
    std::vector<char> seen(kTinyEvalSamples, 0);
    double wrong = 0, total = 0, confidence = 0;
    for (const std::string& bytes : c.records_by_rank)
      for (const EvalRecord& r : from_bytes<std::vector<EvalRecord>>(bytes)) {
        MLPD_CHECK(r.id >= 0 && r.id < kTinyEvalSamples && !seen[static_cast<size_t>(r.id)], "bad or repeated record");
        seen[static_cast<size_t>(r.id)] = 1;
        // An unsure answer (confidence below one half) counts as wrong: it takes a few generations.
        wrong += r.predicted != r.label || r.confidence < 0.5f;
        confidence += r.confidence;
        total += 1;
      }
    MLPD_CHECK(total == kTinyEvalSamples, "records missing from the gather");
    return {100.0 * wrong / total, {confidence / total}, total};
  }

  // Generations: fresh samples each, then an evaluation (as minigo's self-play, then training).
  bool has_own_driver() const override { return true; }
  void drive(LoopServices& loop) override {
    const ResumePoint from = loop.resume_point();
    for (int g = from.epoch; g <= loop.max_epochs() && !loop.stopped(); ++g) {
      loop.begin_epoch(g);
      for (int64_t s = g == from.epoch ? from.step_in_epoch : 0; s < steps_in_epoch(g - 1); ++s)
        if (!loop.train_step(g, s)) break;
      loop.checkpoint_if_stopped_early();
      loop.end_epoch(g);
      if (loop.evaluate(g)) break;
      loop.checkpoint_at_epoch_end(g);
    }
  }
};

}  // namespace

std::unique_ptr<Workload> make_tiny_workload(const WorkloadContext& ctx, const nlohmann::json& config) {
  auto t = std::make_unique<TinyWorkload>();
  t->rank = ctx.rank;
  t->ranks = ctx.ranks;
  t->seed = config.at(keys::kSeed).get<uint64_t>();
  t->noise = config.at("noise").get<float>();
  t->w_view = add_param(t->store, "tiny.w", kClasses * kDims, ParamKind::weight);
  t->b_view = add_param(t->store, "tiny.b", kClasses, ParamKind::bias);
  finalize_params(t->store);
  WorkloadFacts& f = t->facts;
  f.model_summary = "softmax regression, 4 inputs, 3 classes (15 parameters)";
  f.work_unit = "points";
  f.global_batch = config.at(keys::kGlobalBatchSize).get<int64_t>();
  f.steps_per_epoch = config.at("steps_per_generation").get<int64_t>();
  int64_t per_generation = 0;
  for (int64_t s = 0; s < f.steps_per_epoch; ++s) per_generation += TinyWorkload::batch_of(s);
  f.train_samples = per_generation;
  f.eval_samples = kTinyEvalSamples;
  f.bn_span = 0;
  f.eval_kind = EvalKind::Records;
  return t;
}

}  // namespace mlpd
