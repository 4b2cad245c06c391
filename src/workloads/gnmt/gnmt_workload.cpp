// The gnmt workload: the shared translation workload (workloads/translation) with the GNMT model,
// uncased BLEU (MLPerf v0.6/v0.7's GNMT).
#include "core/check.h"
#include "workloads/gnmt/gnmt_model.h"
#include "workloads/registry.h"
#include "workloads/translation/translation_workload.h"

namespace mlpd {

namespace {

GnmtSpec read_gnmt_spec(const nlohmann::json& c) {
  GnmtSpec s;
  s.hidden = c.at("hidden_size").get<int>();
  s.encoder_layers = c.at("encoder_layers").get<int>();
  s.decoder_layers = c.at("decoder_layers").get<int>();
  s.dropout = c.at(kDropout).get<float>();
  s.label_smoothing = c.at(kLabelSmoothing).get<float>();
  if (s.hidden < 1 || s.hidden > 8192) throw UserError("hidden_size must lie in 1..8192", 2);
  if (s.encoder_layers < 2 || s.encoder_layers > 32 || s.decoder_layers < 2 || s.decoder_layers > 32)
    throw UserError("encoder_layers and decoder_layers must lie in 2..32", 2);
  return s;
}

}  // namespace

void check_gnmt_config(const nlohmann::json& config) {
  read_gnmt_spec(config);
  read_translation_config(config);
}

std::unique_ptr<Workload> make_gnmt_workload(const WorkloadContext& ctx, const nlohmann::json& config) {
  TranslationWorkloadSpec w;
  w.benchmark = "gnmt";
  w.config = read_translation_config(config);
  w.lowercase_bleu = true;
  GnmtSpec spec = read_gnmt_spec(config);
  spec.device = ctx.device;
  spec.precision = ctx.precision;
  w.build_model = [spec](const Seq2SeqLimits& limits, int vocab, ParamStore& store) mutable {
    spec.limits = limits;
    spec.vocab = vocab;
    return build_gnmt(spec, store);
  };
  return make_translation_workload(ctx, w);
}

}  // namespace mlpd
