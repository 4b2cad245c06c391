// Optimizers over the flat parameter buffer: one loop over the model's views.
#pragma once
#include <string>
#include <vector>

#include "core/param_store.h"

namespace mlpd {

struct Optimizer {
  std::string name = "sgd";  // "sgd" or "lars"
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  float lars_eta = 0.001f;
  float lars_epsilon = 0.0f;
  std::vector<float> velocity;  // one per parameter, same layout as ParamStore::params
};

void init_optimizer(Optimizer& opt, const ParamStore& s);
// One update with learning rate `lr` using the (already averaged) gradients.
void optimizer_step(Optimizer& opt, ParamStore& s, float lr);

}  // namespace mlpd
