// ResNet models over NHWC activations: "resnet20" (CIFAR-style, 16/32/64 basic blocks) and
// "resnet50" (v1.5 bottlenecks, stride on the 3x3). Parameters and batch-norm running statistics
// live in the caller's ParamStore; activations for max_batch are allocated once at build.
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

struct ResNetSpec {
  std::string variant = "resnet20";
  int blocks_per_stage = 3;  // resnet20 only
  int in_h = 28, in_w = 28, in_c = 1;
  int num_classes = 10;
  int max_batch = 128;        // per forward call
  float bn_momentum = 0.9f;   // running = momentum*running + (1-momentum)*batch
  float bn_epsilon = 1e-5f;
  bool zero_init_residual_gamma = false;  // last BN gamma of each block starts at 0
  Device device = Device::cpu;  // where activations live and ops run (the store is placed by the caller)
  Precision precision = Precision::fp32;  // --precision: the op table (core/precision.h)
};

struct ResNet;  // opaque; defined in the .cpp

// Registers params/state (torchvision order: stem, then per block conv1, bn1, conv2, bn2[, conv3,
// bn3], downsample conv, downsample bn; fc); the CALLER then calls finalize_params and init_resnet.
// Throws UserError-free MLPD_CHECK failures for an unknown variant or a too-small input.
std::unique_ptr<ResNet> build_resnet(const ResNetSpec& spec, ParamStore& store);
// He-normal (fan_out) conv weights, BN gamma=1 beta=0 (gamma=0 for each block's last BN when
// zero_init_residual_gamma), linear weight and bias uniform(+-1/sqrt(fan_in)), running mean 0
// var 1. Deterministic from seed: view i draws from Rng{seed, i}.
void init_resnet(ResNet& net, ParamStore& store, uint64_t seed);
// Bytes of arena scratch one forward+backward of `batch` needs.
size_t resnet_arena_bytes(const ResNet& net, int batch);
// x: [n, in_h, in_w, in_c] NHWC in HOST memory, n <= max_batch (copied to the device; need not
// outlive the call). Returns logits [n, num_classes] on the device, valid until the next forward.
// train=true uses and updates batch stats. The arena is the device's (arena_init_on).
const float* resnet_forward(ResNet& net, ParamStore& store, Arena& arena, const float* x, int n,
                            bool train);
// dlogits [n, num_classes] (device) for the last train-mode forward of the same n. ADDS parameter
// gradients into store.grads and calls on_grad_ready(view) once per param view, in exact reverse
// registration order, as soon as that view's gradient is final for this call.
void resnet_backward(ResNet& net, ParamStore& store, Arena& arena, const float* dlogits, int n,
                     const std::function<void(size_t)>& on_grad_ready);
// One line: variant, parameter count, forward FLOPs per image.
std::string resnet_summary(const ResNet& net);
// Bytes of the model's activation and gradient buffers on its device (DeviceBuffers).
size_t resnet_activation_bytes(const ResNet& net);
// Forward multiply-adds x 2 per image (convolutions and the linear layer).
double resnet_flops_per_image(const ResNet& net);

}  // namespace mlpd

// ResNet is opaque, so std::unique_ptr<ResNet> deletes it through a function defined beside it:
// callers may own and destroy a ResNet without seeing its definition.
template <>
struct std::default_delete<mlpd::ResNet> {
  void operator()(mlpd::ResNet* p) const;
};
