#include "workloads/ncf/ncf_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/rng.h"
#include "kernels/device.h"

namespace mlpd {

namespace {

size_t rows_x(int rows, int width) { return static_cast<size_t>(rows) * static_cast<size_t>(width); }

}  // namespace

std::unique_ptr<NeuMF> build_neumf(const NeuMFSpec& spec, ParamStore& store) {
  const auto& L = spec.mlp_layers;
  if (spec.users < 1 || spec.items < 1) throw UserError("NeuMF needs at least one user and one item");
  if (spec.mf_dim < 1) throw UserError("mf_dim must be positive", 2);
  if (L.size() < 2 || L[0] % 2 != 0)
    throw UserError("mlp_layer_sizes needs at least two sizes and an even first size (the two embeddings)", 2);
  for (int x : L)
    if (x < 1) throw UserError("mlp_layer_sizes must be positive", 2);
  if (spec.max_batch < 1) throw UserError("NeuMF max batch must be positive");
  auto m = std::make_unique<NeuMF>();
  m->spec = spec;
  const size_t U = static_cast<size_t>(spec.users), I = static_cast<size_t>(spec.items);
  const size_t F = static_cast<size_t>(spec.mf_dim), E = static_cast<size_t>(L[0] / 2);
  m->gmf_user = add_param(store, "gmf_user_embedding", U * F, ParamKind::weight);
  m->gmf_item = add_param(store, "gmf_item_embedding", I * F, ParamKind::weight);
  m->mlp_user = add_param(store, "mlp_user_embedding", U * E, ParamKind::weight);
  m->mlp_item = add_param(store, "mlp_item_embedding", I * E, ParamKind::weight);
  for (size_t j = 1; j < L.size(); ++j) {
    std::string n("mlp");
    n.append(std::to_string(j));
    m->w.push_back(add_param(store, n + ".weight", static_cast<size_t>(L[j - 1]) * L[j], ParamKind::weight));
    m->b.push_back(add_param(store, n + ".bias", static_cast<size_t>(L[j]), ParamKind::bias));
  }
  const int zw = spec.mf_dim + L.back();
  m->final_w = add_param(store, "final.weight", static_cast<size_t>(zw), ParamKind::weight);
  m->final_b = add_param(store, "final.bias", 1, ParamKind::bias);

  const int B = spec.max_batch;
  const int widest = *std::max_element(L.begin(), L.end());
  m->ops = &ops_for(spec.device, spec.precision);
  NeuMF& r = *m;
  r.buffers.device = spec.device;
  auto floats = [&r](size_t n) { return r.buffers.floats(n); };
  r.gmf_u = floats(rows_x(B, spec.mf_dim));
  r.gmf_i = floats(rows_x(B, spec.mf_dim));
  r.x0 = floats(rows_x(B, L[0]));
  for (size_t j = 1; j < L.size(); ++j) r.h.push_back(floats(rows_x(B, L[j])));
  r.z = floats(rows_x(B, zw));
  r.logits = floats(static_cast<size_t>(B));
  r.dz = floats(rows_x(B, zw));
  r.dgmf_u = floats(rows_x(B, spec.mf_dim));
  r.dgmf_i = floats(rows_x(B, spec.mf_dim));
  r.dh_a = floats(rows_x(B, widest));
  r.dh_b = floats(rows_x(B, widest));
  r.dx0 = floats(rows_x(B, L[0]));
  if (spec.device != Device::cpu) {
    // Two index buffers of B int32 each, carved from one float-sized allocation.
    auto* idx = reinterpret_cast<int32_t*>(floats(2 * static_cast<size_t>(B)));
    r.device_users = idx;
    r.device_items = idx + B;
    r.eval_users.assign(static_cast<size_t>(B), 0);
  }
  r.host_scores.assign(static_cast<size_t>(B), 0.0f);  // neumf_score_users' several users
  return m;
}

void init_neumf(const NeuMF& m, ParamStore& store, uint64_t seed) {
  MLPD_CHECK(!on_device(store), "init_neumf writes the host buffers: call it before place_store_on");
  const auto& L = m.spec.mlp_layers;
  uint64_t stream = 1;
  auto normal = [&](size_t view, float stddev) {
    Rng r{seed, stream++};
    float* p = param_ptr(store, view);
    for (size_t i = 0; i < store.views[view].count; ++i) p[i] = stddev * r.normal();
  };
  auto uniform = [&](size_t view, float limit) {
    Rng r{seed, stream++};
    float* p = param_ptr(store, view);
    for (size_t i = 0; i < store.views[view].count; ++i) p[i] = limit * (2.0f * r.uniform() - 1.0f);
  };
  normal(m.gmf_user, 0.01f);
  normal(m.gmf_item, 0.01f);
  normal(m.mlp_user, 0.01f);
  normal(m.mlp_item, 0.01f);
  for (size_t j = 1; j < L.size(); ++j) {
    uniform(m.w[j - 1], std::sqrt(6.0f / static_cast<float>(L[j - 1] + L[j])));
    std::fill_n(param_ptr(store, m.b[j - 1]), L[j], 0.0f);
  }
  uniform(m.final_w, std::sqrt(3.0f / static_cast<float>(m.spec.mf_dim + L.back())));
  *param_ptr(store, m.final_b) = 0.0f;
}

const float* neumf_forward(NeuMF& m, const ParamStore& store, const int32_t* users, const int32_t* items, int n) {
  MLPD_CHECK(n >= 0 && n <= m.spec.max_batch, "NeuMF batch exceeds the model's max batch");
  const OpTable& o = *m.ops;
  const auto& L = m.spec.mlp_layers;
  const int F = m.spec.mf_dim, E = L[0] / 2, zw = F + L.back();
  users = visible_on(m.spec.device, users, m.device_users, static_cast<size_t>(n));
  items = visible_on(m.spec.device, items, m.device_items, static_cast<size_t>(n));
  o.embedding_gather(param_ptr(store, m.gmf_user), F, users, n, m.gmf_u, F);
  o.embedding_gather(param_ptr(store, m.gmf_item), F, items, n, m.gmf_i, F);
  o.embedding_gather(param_ptr(store, m.mlp_user), E, users, n, m.x0, L[0]);
  o.embedding_gather(param_ptr(store, m.mlp_item), E, items, n, m.x0 + E, L[0]);
  const float* x = m.x0;
  for (size_t j = 1; j < L.size(); ++j) {
    float* y = m.h[j - 1];
    o.linear_forward(x, n, L[j - 1], L[j], param_ptr(store, m.w[j - 1]), param_ptr(store, m.b[j - 1]), y);
    o.relu_forward(y, y, rows_x(n, L[j]));
    x = y;
  }
  // z = [GMF, MLP out]
  o.gmf_forward(m.gmf_u, F, m.gmf_i, F, n, F, m.z, zw);
  o.copy_rows(x, L.back(), n, L.back(), m.z + F, zw);
  o.linear_forward(m.z, n, zw, 1, param_ptr(store, m.final_w), param_ptr(store, m.final_b), m.logits);
  return m.logits;
}

void neumf_backward(NeuMF& m, ParamStore& store, const int32_t* users, const int32_t* items, int n,
                    const float* dlogits, const std::function<void(size_t)>& ready) {
  const OpTable& o = *m.ops;
  const auto& L = m.spec.mlp_layers;
  const int F = m.spec.mf_dim, E = L[0] / 2, zw = F + L.back(), Lk = L.back();
  auto done = [&](size_t view) {
    if (ready) ready(view);
  };
  // The forward of this batch copied its indices up already (same n, same order).
  if (m.spec.device != Device::cpu) {
    users = m.device_users;
    items = m.device_items;
  }
  o.linear_backward(m.z, dlogits, n, zw, 1, param_ptr(store, m.final_w), m.dz, grad_ptr(store, m.final_w),
                    grad_ptr(store, m.final_b));
  done(m.final_b);
  done(m.final_w);
  // MLP branch: dh = dz[:, F:], then down the tower.
  float* dh = m.dh_a;
  float* other = m.dh_b;
  o.copy_rows(m.dz + F, zw, n, Lk, dh, Lk);
  for (size_t j = L.size() - 1; j >= 1; --j) {
    const float* y = m.h[j - 1];
    o.relu_backward(y, dh, dh, rows_x(n, L[j]));
    const float* x = j >= 2 ? m.h[j - 2] : m.x0;
    float* dx = j >= 2 ? other : m.dx0;
    o.linear_backward(x, dh, n, L[j - 1], L[j], param_ptr(store, m.w[j - 1]), dx, grad_ptr(store, m.w[j - 1]),
                      grad_ptr(store, m.b[j - 1]));
    done(m.b[j - 1]);
    done(m.w[j - 1]);
    std::swap(dh, other);
  }
  o.embedding_scatter_add(grad_ptr(store, m.mlp_item), E, items, n, m.dx0 + E, L[0]);
  done(m.mlp_item);
  o.embedding_scatter_add(grad_ptr(store, m.mlp_user), E, users, n, m.dx0, L[0]);
  done(m.mlp_user);
  // GMF branch.
  o.gmf_backward(m.gmf_u, F, m.gmf_i, F, m.dz, zw, n, F, m.dgmf_u, m.dgmf_i);
  o.embedding_scatter_add(grad_ptr(store, m.gmf_item), F, items, n, m.dgmf_i, F);
  done(m.gmf_item);
  o.embedding_scatter_add(grad_ptr(store, m.gmf_user), F, users, n, m.dgmf_u, F);
  done(m.gmf_user);
}

void neumf_eval_prepare(NeuMF& m, const ParamStore& store) {
  m.eval_prepared = true;
  if (m.spec.device != Device::cpu) return;  // the GPU scores through neumf_forward
  const auto& L = m.spec.mlp_layers;
  const int E = L[0] / 2, L1 = L[1];
  const int items = static_cast<int>(m.spec.items);
  m.item_l1.resize(rows_x(items, L1));
  m.user_l1.resize(static_cast<size_t>(L1));
  // item_l1 = Q^M [items, E] * W1[E:2E, :]
  gemm(false, false, items, L1, E, 1.0f, param_ptr(store, m.mlp_item), E, param_ptr(store, m.w[0]) + rows_x(E, L1), L1,
       0.0f, m.item_l1.data(), L1);
}

namespace {

// One user's scores on the CPU: the split first layer (neumf_eval_prepare). Returns m.logits.
const float* score_user_cpu(NeuMF& m, const ParamStore& store, int32_t user, const int32_t* items, int n) {
  const auto& L = m.spec.mlp_layers;
  const int F = m.spec.mf_dim, E = L[0] / 2, L1 = L[1], zw = F + L.back();
  // User half of layer 1 plus its bias.
  linear_forward(param_ptr(store, m.mlp_user) + rows_x(user, E), 1, E, L1, param_ptr(store, m.w[0]),
                 param_ptr(store, m.b[0]), m.user_l1.data());
  float* h1 = m.h[0];
  for (int i = 0; i < n; ++i) {
    const float* __restrict a = m.item_l1.data() + rows_x(items[i], L1);
    const float* __restrict u = m.user_l1.data();
    float* __restrict y = h1 + rows_x(i, L1);
    for (int j = 0; j < L1; ++j) y[j] = std::fmax(u[j] + a[j], 0.0f);
  }
  const float* x = h1;
  for (size_t j = 2; j < L.size(); ++j) {
    float* y = m.h[j - 1];
    linear_forward(x, n, L[j - 1], L[j], param_ptr(store, m.w[j - 1]), param_ptr(store, m.b[j - 1]), y);
    relu_forward(y, y, rows_x(n, L[j]));
    x = y;
  }
  // GMF: the user's vector times each item's.
  const float* pu = param_ptr(store, m.gmf_user) + rows_x(user, F);
  embedding_gather(param_ptr(store, m.gmf_item), F, items, n, m.gmf_i, F);
  const int Lk = L.back();
  for (int i = 0; i < n; ++i) {
    float* zr = m.z + rows_x(i, zw);
    const float* qi = m.gmf_i + rows_x(i, F);
    for (int j = 0; j < F; ++j) zr[j] = pu[j] * qi[j];
    std::memcpy(zr + F, x + rows_x(i, Lk), sizeof(float) * Lk);
  }
  linear_forward(m.z, n, zw, 1, param_ptr(store, m.final_w), param_ptr(store, m.final_b), m.logits);
  return m.logits;
}

}  // namespace

int neumf_eval_users_per_call(const NeuMF& m, int per_user) {
  if (m.spec.device == Device::cpu || per_user <= 0) return 1;
  return std::max(1, m.spec.max_batch / per_user);
}

const float* neumf_score_users(NeuMF& m, const ParamStore& store, int32_t first_user, int users,
                               const int32_t* items, int per_user) {
  const int64_t n = int64_t(users) * per_user;
  MLPD_CHECK(users >= 0 && per_user >= 0 && n <= m.spec.max_batch, "NeuMF batch exceeds the model's max batch");
  MLPD_CHECK(m.eval_prepared, "neumf_score_users before neumf_eval_prepare");
  if (m.spec.device != Device::cpu) {
    for (int j = 0; j < users; ++j)
      std::fill_n(m.eval_users.begin() + int64_t(j) * per_user, per_user, first_user + j);
    const float* scores = neumf_forward(m, store, m.eval_users.data(), items, static_cast<int>(n));
    copy_to_host(m.spec.device, m.host_scores.data(), scores, sizeof(float) * static_cast<size_t>(n));
    return m.host_scores.data();
  }
  if (users == 1) return score_user_cpu(m, store, first_user, items, per_user);
  for (int j = 0; j < users; ++j)
    std::copy_n(score_user_cpu(m, store, first_user + j, items + int64_t(j) * per_user, per_user), per_user,
                m.host_scores.begin() + int64_t(j) * per_user);
  return m.host_scores.data();
}

std::string neumf_summary(const NeuMF& m, const ParamStore& store) {
  const auto& L = m.spec.mlp_layers;
  std::string layers;
  for (size_t j = 0; j < L.size(); ++j) {
    if (j) layers.push_back('-');
    layers.append(std::to_string(L[j]));
  }
  size_t emb = 0;
  for (size_t v : {m.gmf_user, m.gmf_item, m.mlp_user, m.mlp_item}) emb += store.views[v].count;
  return "NeuMF: " + std::to_string(m.spec.users) + " users, " + std::to_string(m.spec.items) + " items, GMF " +
         std::to_string(m.spec.mf_dim) + ", MLP " + layers + " (embeddings " + std::to_string(L[0] / 2) + "), " +
         std::to_string(store.param_count) + " parameters (" + std::to_string(emb) + " in embeddings)";
}

double neumf_train_flops_per_sample(const NeuMF& m) {
  const auto& L = m.spec.mlp_layers;
  double macs = m.spec.mf_dim + L.back();
  for (size_t j = 1; j < L.size(); ++j) macs += static_cast<double>(L[j - 1]) * L[j];
  return 3.0 * 2.0 * macs;  // backward ~ 2x forward
}

}  // namespace mlpd
