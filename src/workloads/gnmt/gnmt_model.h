// GNMT as MLPerf's reference trains it (rnn_translator, seq2seq/models/gnmt.py): an LSTM
// encoder-decoder with normalized Bahdanau attention and one embedding table shared by the source
// and the target.
//   Encoder: layer 0 a bidirectional LSTM (hidden units each way; the backward direction starts at
//   each sentence's own last token), layer 1 an LSTM 2*hidden -> hidden, layers >= 2 LSTMs
//   hidden -> hidden with a residual connection (y = lstm(x) + x).
//   Decoder: layer 0 an LSTM over the embedded target input whose outputs are the attention
//   queries; attention (query and key projections without bias, bias, v, scalar g; masked by the
//   source lengths) gives one context per target step; layer i >= 1 takes concat(layer i-1's
//   output, context) -> hidden, layers >= 2 with a residual; classifier linear hidden -> vocab.
//   Dropout on every LSTM layer's input (in the decoder on the whole concatenation, as the
//   reference does); decoder states start at zero; label-smoothed cross-entropy over the valid
//   target tokens only (classifier computed for those rows alone).
//   Init: every parameter uniform(-0.1, 0.1) except the padding row (0), the attention bias (0)
//   and g (1/sqrt(hidden)). One LSTM bias per layer (PyTorch's b_ih; the reference zeroes b_hh).
// Where it differs from the reference:
//   - Encoder layers >= 1 and the decoder LSTMs run with the length mask (a row past its end keeps
//     its state) where the reference runs them unpacked over the padding. Outputs at valid
//     positions, hence the loss and every gradient, are the same; padded positions' outputs
//     differ, and are masked by the attention or left out of the loss in both.
//   - Dropout masks are counter-based (kernels: dropout_forward), drawn from (seed, element
//     offset), not from PyTorch's generator.
//   - The attention's tanh is the kernels' polynomial one (absolute error < 2e-7).
// Layout: inside the LSTMs activations are time-major [T, B, width] (step t is a contiguous
// [B, width] block for the per-step GEMM); the attention works batch-major [B, T, width], and the
// conversions are row permutations (embedding_gather with a row map; the backward of a permutation
// is the gather by its inverse). Requires encoder_layers >= 2 and decoder_layers >= 2.
#pragma once
#include "core/precision.h"
#include <cstdint>
#include <memory>

#include "core/tensor.h"
#include "kernels/device.h"
#include "workloads/translation/seq2seq.h"

namespace mlpd {

struct GnmtSpec {
  int vocab = 0;
  int hidden = 256;
  int encoder_layers = 2;
  int decoder_layers = 2;
  float dropout = 0.2f;
  float label_smoothing = 0.1f;
  Seq2SeqLimits limits;
  Device device = Device::cpu;
  Precision precision = Precision::fp32;  // --precision: the op table (core/precision.h)
};

// Builds the model's views into `store` (before finalize_params) and its buffers on spec.device.
// View order: embedding, encoder layers, decoder layer 0, attention, decoder layers >= 1,
// classifier (the reverse of the order in which backward finishes them).
std::unique_ptr<Seq2Seq> build_gnmt(const GnmtSpec& spec, ParamStore& store);

}  // namespace mlpd
