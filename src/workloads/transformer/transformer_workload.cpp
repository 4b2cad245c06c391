// The transformer workload: the shared translation workload (workloads/translation) with the
// Transformer model, cased BLEU (MLPerf v0.7's transformer).
#include "core/check.h"
#include "workloads/transformer/transformer_model.h"
#include "workloads/translation/translation_workload.h"
#include "workloads/registry.h"

namespace mlpd {

namespace {

TransformerSpec read_transformer_spec(const nlohmann::json& c) {
  TransformerSpec s;
  s.d_model = c.at("d_model").get<int>();
  s.heads = c.at("heads").get<int>();
  s.ffn_dim = c.at("ffn_dim").get<int>();
  s.encoder_layers = c.at("encoder_layers").get<int>();
  s.decoder_layers = c.at("decoder_layers").get<int>();
  s.dropout = c.at(kDropout).get<float>();
  s.label_smoothing = c.at(kLabelSmoothing).get<float>();
  if (s.d_model < 2 || s.d_model > 8192 || s.d_model % 2 != 0) throw UserError("d_model must be even, 2..8192", 2);
  if (s.heads < 1 || s.d_model % s.heads != 0) throw UserError("heads must divide d_model", 2);
  if (s.ffn_dim < 1 || s.ffn_dim > 65536) throw UserError("ffn_dim must lie in 1..65536", 2);
  if (s.encoder_layers < 1 || s.encoder_layers > 64 || s.decoder_layers < 1 || s.decoder_layers > 64)
    throw UserError("encoder_layers and decoder_layers must lie in 1..64", 2);
  return s;
}

}  // namespace

void check_transformer_config(const nlohmann::json& config) {
  read_transformer_spec(config);
  read_translation_config(config);
}

std::unique_ptr<Workload> make_transformer_workload(const WorkloadContext& ctx, const nlohmann::json& config) {
  TranslationWorkloadSpec w;
  w.benchmark = "transformer";
  w.config = read_translation_config(config);
  w.lowercase_bleu = false;
  TransformerSpec spec = read_transformer_spec(config);
  spec.device = ctx.device;
  spec.precision = ctx.precision;
  w.build_model = [spec](const Seq2SeqLimits& limits, int vocab, ParamStore& store) mutable {
    spec.limits = limits;
    spec.vocab = vocab;
    return build_transformer(spec, store);
  };
  return make_translation_workload(ctx, w);
}

}  // namespace mlpd
