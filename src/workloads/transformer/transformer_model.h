// The Transformer (Vaswani et al. 2017) as MLPerf's reference trains it (fairseq's
// transformer_wmt_en_de_big, scaled down at mini): post-norm encoder-decoder layers
// (x = LayerNorm(x + Dropout(sublayer(x)))), multi-head attention through the fused attention
// kernel, ReLU feed-forward, sinusoidal positions, one embedding table shared by the source, the
// target and the output projection (logits = y E^T), embeddings scaled by sqrt(d_model).
// Dropout (residual and embedding) is counter-based (kernels: dropout_forward).
#pragma once
#include "core/precision.h"
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "kernels/device.h"
#include "workloads/translation/seq2seq.h"

namespace mlpd {

struct TransformerSpec {
  int vocab = 0;
  int d_model = 256;
  int heads = 4;
  int ffn_dim = 1024;
  int encoder_layers = 3;
  int decoder_layers = 3;
  float dropout = 0.1f;
  float label_smoothing = 0.1f;
  Seq2SeqLimits limits;
  Device device = Device::cpu;
  Precision precision = Precision::fp32;  // --precision: the op table (core/precision.h)
  // With bf16: keep what the layers save for backward as bf16 where no bit changes (the model's
  // comment says which). Off only in the test that compares the two.
  bool bf16_storage = true;
};

// Builds the model's views into `store` (before finalize_params) and its buffers on spec.device.
std::unique_ptr<Seq2Seq> build_transformer(const TransformerSpec& spec, ParamStore& store);

}  // namespace mlpd
