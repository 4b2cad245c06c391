// NeuMF (He et al. 2017) as MLPerf's NCF reference builds it:
//   GMF:  p_u^G * q_i^G                                   (mf_dim factors)
//   MLP:  relu(... relu([p_u^M, q_i^M] W1 + b1) ...)      (mlp_layers: [L0, L1, ..., Lk];
//                                                          embeddings L0/2 each, Linear L(j-1)->Lj)
//   out:  logit = [GMF, MLP] w + b,  p = sigmoid(logit)   (trained with binary cross-entropy)
// Parameters are views into the workload's ParamStore; the four embedding tables are named
// *_embedding (LazyAdam updates only their touched rows). Activation buffers are owned by the
// model, sized for max_batch rows at build: no allocation in a step.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/param_store.h"

namespace mlpd {

struct NeuMFSpec {
  int64_t users = 0;
  int64_t items = 0;
  int mf_dim = 64;
  std::vector<int> mlp_layers{256, 256, 128, 64};
  int max_batch = 0;
};

struct NeuMF {
  NeuMFSpec spec;
  size_t gmf_user = 0, gmf_item = 0, mlp_user = 0, mlp_item = 0;  // embedding views
  std::vector<size_t> w, b;                                      // MLP layer j (1..k) at j-1
  size_t final_w = 0, final_b = 0;
  // Forward activations, [max_batch, width] each.
  std::vector<float> gmf_u, gmf_i;  // gathered GMF embeddings
  std::vector<float> x0;            // [p_u^M, q_i^M]
  std::vector<std::vector<float>> h;  // h[j-1]: output of MLP layer j after ReLU
  std::vector<float> z;             // [GMF, MLP out]
  std::vector<float> logits;
  // Backward scratch.
  std::vector<float> dz, dgmf_u, dgmf_i, dh_a, dh_b, dx0;
  // Evaluation: the item half of the first MLP layer, q_i^M * W1[E:2E, :], for every item.
  std::vector<float> item_l1;  // [items, L1], filled by neumf_eval_prepare
  std::vector<float> user_l1;  // [L1]
};

std::unique_ptr<NeuMF> build_neumf(const NeuMFSpec& spec, ParamStore& store);
// MLPerf reference init: embeddings N(0, 0.01); MLP weights Glorot uniform; final weights LeCun
// uniform; biases 0. Deterministic in the seed.
void init_neumf(const NeuMF& m, ParamStore& store, uint64_t seed);
// Logits [n] (pointer into the model) for the (user, item) pairs. n <= max_batch.
const float* neumf_forward(NeuMF& m, const ParamStore& store, const int32_t* users, const int32_t* items, int n);
// Accumulates parameter gradients from dlogits [n], after neumf_forward on the same batch.
// ready (nullable) is called with each view as soon as its gradient is final, in reverse view
// order (final layer, MLP tower top-down, MLP embeddings, GMF embeddings), for overlapped allreduce.
void neumf_backward(NeuMF& m, ParamStore& store, const int32_t* users, const int32_t* items, int n,
                    const float* dlogits, const std::function<void(size_t)>& ready = nullptr);
// Evaluation scoring, exact up to float rounding and cheaper than neumf_forward: the first MLP
// layer splits into a user half (once per user) and an item half (once per evaluation, for all
// items), so each (user, item) pair costs the layers after the first. Call neumf_eval_prepare
// once after the parameters change, then neumf_score_user for each user (n <= max_batch).
void neumf_eval_prepare(NeuMF& m, const ParamStore& store);
const float* neumf_score_user(NeuMF& m, const ParamStore& store, int32_t user, const int32_t* items, int n);
std::string neumf_summary(const NeuMF& m, const ParamStore& store);
// Dense FLOPs of forward + backward per sample (embedding traffic not counted).
double neumf_train_flops_per_sample(const NeuMF& m);

}  // namespace mlpd
