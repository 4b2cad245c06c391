// NeuMF (He et al. 2017) as MLPerf's NCF reference builds it:
//   GMF:  p_u^G * q_i^G                                   (mf_dim factors)
//   MLP:  relu(... relu([p_u^M, q_i^M] W1 + b1) ...)      (mlp_layers: [L0, L1, ..., Lk];
//                                                          embeddings L0/2 each, Linear L(j-1)->Lj)
//   out:  logit = [GMF, MLP] w + b,  p = sigmoid(logit)   (trained with binary cross-entropy)
// Parameters are views into the workload's ParamStore; the four embedding tables are named
// *_embedding (LazyAdam updates only their touched rows). Activation buffers are owned by the
// model, sized for max_batch rows at build: no allocation in a step.
#pragma once
#include "core/precision.h"
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/param_store.h"
#include "core/tensor.h"
#include "kernels/device.h"

namespace mlpd {

struct NeuMFSpec {
  int64_t users = 0;
  int64_t items = 0;
  int mf_dim = 64;
  std::vector<int> mlp_layers{256, 256, 128, 64};
  int max_batch = 0;
  Device device = Device::cpu;  // where activations live and ops run (the store is placed by the caller)
  Precision precision = Precision::fp32;  // --precision: the op table (core/precision.h)
};

struct NeuMF {
  NeuMFSpec spec;
  const OpTable* ops = nullptr;
  size_t gmf_user = 0, gmf_item = 0, mlp_user = 0, mlp_item = 0;  // embedding views
  std::vector<size_t> w, b;                                      // MLP layer j (1..k) at j-1
  size_t final_w = 0, final_b = 0;
  // Forward activations on the device, [max_batch, width] each.
  float* gmf_u = nullptr;        // gathered GMF embeddings
  float* gmf_i = nullptr;
  float* x0 = nullptr;           // [p_u^M, q_i^M]
  std::vector<float*> h;         // h[j-1]: output of MLP layer j after ReLU
  float* z = nullptr;            // [GMF, MLP out]
  float* logits = nullptr;
  // Backward scratch.
  float *dz = nullptr, *dgmf_u = nullptr, *dgmf_i = nullptr, *dh_a = nullptr, *dh_b = nullptr, *dx0 = nullptr;
  // On a GPU: the batch's indices copied up, and the evaluated pairs' users.
  int32_t* device_users = nullptr;
  int32_t* device_items = nullptr;
  std::vector<int32_t> eval_users;
  std::vector<float> host_scores;  // [max_batch]: neumf_score_users' scores for the metric
  // CPU evaluation: the item half of the first MLP layer, q_i^M * W1[E:2E, :], for every item.
  std::vector<float> item_l1;  // [items, L1], filled by neumf_eval_prepare
  std::vector<float> user_l1;  // [L1]
  bool eval_prepared = false;
  DeviceBuffers buffers;  // the activations above, on spec.device
};

std::unique_ptr<NeuMF> build_neumf(const NeuMFSpec& spec, ParamStore& store);
// MLPerf reference init: embeddings N(0, 0.01); MLP weights Glorot uniform; final weights LeCun
// uniform; biases 0. Deterministic in the seed.
void init_neumf(const NeuMF& m, ParamStore& store, uint64_t seed);
// Logits [n] (device pointer into the model) for the (user, item) pairs, indices in HOST memory
// (copied up on a GPU). n <= max_batch.
const float* neumf_forward(NeuMF& m, const ParamStore& store, const int32_t* users, const int32_t* items, int n);
// Accumulates parameter gradients from dlogits [n], after neumf_forward on the same batch.
// ready (nullable) is called with each view as soon as its gradient is final, in reverse view
// order (final layer, MLP tower top-down, MLP embeddings, GMF embeddings), for overlapped allreduce.
void neumf_backward(NeuMF& m, ParamStore& store, const int32_t* users, const int32_t* items, int n,
                    const float* dlogits, const std::function<void(size_t)>& ready = nullptr);
// Evaluation scoring, exact up to float rounding and cheaper than neumf_forward: the first MLP
// layer splits into a user half (once per user) and an item half (once per evaluation, for all
// items), so each (user, item) pair costs the layers after the first. Call neumf_eval_prepare
// once after the parameters change, then neumf_score_users for consecutive users. It returns HOST
// scores [users, per_user]: user first_user + j's items are items[j * per_user ...] and
// users * per_user <= max_batch. On a GPU the scores come from neumf_forward on the (user, item)
// pairs instead (the same function up to float rounding), all users' pairs in one forward and one
// copy back: the host waits once per call, so a caller scores neumf_eval_users_per_call users at once.
void neumf_eval_prepare(NeuMF& m, const ParamStore& store);
const float* neumf_score_users(NeuMF& m, const ParamStore& store, int32_t first_user, int users,
                               const int32_t* items, int per_user);
// How many users one neumf_score_users call should score: 1 on the CPU (the split first layer works
// a user at a time), as many as fit in max_batch on a GPU.
int neumf_eval_users_per_call(const NeuMF& m, int per_user);
std::string neumf_summary(const NeuMF& m, const ParamStore& store);
// Dense FLOPs of forward + backward per sample (embedding traffic not counted).
double neumf_train_flops_per_sample(const NeuMF& m);

}  // namespace mlpd
