// MiniGo's policy-value network: a residual tower of 3x3 conv+BN blocks over the board's feature
// planes (NHWC [n, size, size, planes]), a policy head (1x1 conv to 2 planes, BN, ReLU, linear to
// size*size + 1 moves, the last one pass) and a value head (1x1 conv to 1 plane, BN, ReLU, linear to
// `value_hidden`, ReLU, linear to one logit; the value is tanh of it, the loss squared error).
#pragma once
#include "core/precision.h"
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/arena.h"
#include "core/param_store.h"
#include "core/tensor.h"

namespace mlpd {

struct MinigoNetSpec {
  int board = 9;
  int planes = 17;         // 8 positions x 2 colours + side to move (MiniGo's features)
  int channels = 32;
  int blocks = 3;
  int value_hidden = 64;
  int max_batch = 64;
  float bn_momentum = 0.9f, bn_eps = 1e-5f;
  Device device = Device::cpu;
  Precision precision = Precision::fp32;  // --precision: the op table (core/precision.h)
  int moves() const { return board * board + 1; }
};

struct MinigoNet;

std::unique_ptr<MinigoNet> build_minigo_net(const MinigoNetSpec& spec, ParamStore& store);
void init_minigo_net(MinigoNet& net, ParamStore& store, uint64_t seed);
size_t minigo_arena_bytes(const MinigoNet& net, int batch);

struct MinigoOutputs {
  const float* policy = nullptr;  // [n, moves] logits, on the device
  const float* value = nullptr;   // [n] logits (value = tanh), on the device
};
// x: [n, board, board, planes] in HOST memory (copied up). Valid until the next forward.
MinigoOutputs minigo_forward(MinigoNet& net, ParamStore& store, Arena& arena, const float* x, int n, bool train);
// dpolicy [n, moves], dvalue [n] (device) for the last train-mode forward of the same n: ADDS
// parameter gradients, ready(view) once per view in reverse registration order.
void minigo_backward(MinigoNet& net, ParamStore& store, Arena& arena, const float* dpolicy, const float* dvalue,
                     int n, const std::function<void(size_t)>& ready);
std::string minigo_summary(const MinigoNet& net);
// Bytes of the model's activation and gradient buffers on its device (DeviceBuffers).
size_t minigo_activation_bytes(const MinigoNet& net);
double minigo_flops_per_position(const MinigoNet& net);  // forward

}  // namespace mlpd

template <>
struct std::default_delete<mlpd::MinigoNet> {
  void operator()(mlpd::MinigoNet* p) const;
};
