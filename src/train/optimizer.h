// Optimizers over the flat parameter buffer: one loop over the model's views.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/param_store.h"

namespace mlpd {

struct Optimizer {
  std::string name = "sgd";  // "sgd", "lars", "adam" or "lazy_adam"
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  float lars_eta = 0.001f;
  float lars_epsilon = 0.0f;
  float clip_norm = 0.0f;  // > 0: gradients scaled so their global L2 norm is at most this
  std::vector<float> velocity;  // one per parameter, same layout as ParamStore::params
                                // (Adam: the first moment m)
  // Adam / LazyAdam (MLPerf v0.5 NCF: opt_adam_beta_1, opt_adam_beta_2, opt_adam_epsilon).
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  std::vector<float> second_moment;  // Adam's v, same layout; allocated once by init_optimizer
  int64_t steps = 0;                 // completed Adam steps (bias correction uses steps + 1)
  // On a GPU (the store's device) the moments live there; the vectors above are then host
  // mirrors, current after download_optimizer (checkpoints) and pushed by upload_optimizer.
  // Shared, so that Hyperparams stay copyable: copy an Optimizer only before init_optimizer.
  Device device = Device::cpu;
  std::shared_ptr<std::byte> device_moments;
  float* device_velocity = nullptr;
  float* device_second_moment = nullptr;
  // Gradient clipping's sum of squares, where the ops add it: a double on the store's device (so
  // that clipping on a GPU never waits for it).
  std::shared_ptr<std::byte> norm_memory;
  double* norm_sum = nullptr;
};

// LazyAdam (TensorFlow's LazyAdamOptimizer, as MLPerf's NCF submissions used it): in the views
// whose name ends in kLazyViewSuffix (the embedding tables) only the elements with a non-zero
// gradient are updated (their m, v and p), with the global step count's bias correction; every
// other view gets dense Adam. A row no sample of the step touched has an all-zero gradient after
// the allreduce, so its moments do not decay. The non-zero test is exact because the trainer
// zeroes the gradient buffer before each step and a touched row's gradient is never exactly zero
// in practice; an element whose summed gradient happens to be 0.0 is simply left as is.
inline constexpr const char* kLazyViewSuffix = "_embedding";

// Sizes the moments like the store and places them on the store's device.
void init_optimizer(Optimizer& opt, const ParamStore& s);
void download_optimizer(Optimizer& opt);
void upload_optimizer(Optimizer& opt);
// One update with learning rate `lr` using the (already averaged) gradients; with clip_norm set,
// first scales them to that global norm when theirs is larger (the same on every rank: the sums
// are identical there).
void optimizer_step(Optimizer& opt, ParamStore& s, float lr);

}  // namespace mlpd
