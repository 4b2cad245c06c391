// What the Mask R-CNN GPU tests (gpu_maskrcnn_model_test.cpp, gpu_maskrcnn_step_test.cpp) share: a
// model built and initialised the same way on either device, its parameters moved off the init so
// that every path carries a visible gradient, and the per-view comparison of gradients.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "core/param_store.h"
#include "core/rng.h"
#include "gpu_test_util.h"
#include "kernels/device.h"
#include "workloads/maskrcnn/maskrcnn_model.h"

namespace mlpd::gpu_test {

struct PlacedMaskRcnn {
  ParamStore store;
  std::unique_ptr<MaskRcnn> net;
  Arena arena;
};

// spec on spec.device: built, initialised with seed 3, each parameter moved by up to 0.3 (larger than
// the init), placed on the device with zero gradients and an arena for its forwards.
inline std::unique_ptr<PlacedMaskRcnn> placed_maskrcnn(const MaskRcnnSpec& spec) {
  auto m = std::make_unique<PlacedMaskRcnn>();
  m->net = build_maskrcnn(spec, m->store);
  finalize_params(m->store);
  init_maskrcnn(*m->net, m->store, 3);
  Rng r{5, 99};
  for (float& p : m->store.params) p += 0.3f * (2.0f * r.uniform() - 1.0f);
  place_store_on(m->store, spec.device);
  zero_grads(m->store);
  arena_init_on(spec.device, m->arena, maskrcnn_arena_bytes(*m->net));
  return m;
}

// The store's gradients on the host.
inline std::vector<float> host_grads(ParamStore& store) {
  std::vector<float> g(store.param_count, 0.0f);
  copy_to_host(store.device, g.data(), grads_data(store), g.size() * sizeof(float));
  return g;
}

// Each view of got within rel of that view's largest |want| (+ 1e-7).
inline void expect_views_close(const std::vector<ParamView>& views, const std::vector<float>& got,
                               const std::vector<float>& want, double rel) {
  ASSERT_EQ(got.size(), want.size());
  for (const ParamView& v : views) {
    const std::vector<float> w(want.begin() + long(v.offset), want.begin() + long(v.offset + v.count));
    const std::vector<float> g(got.begin() + long(v.offset), got.begin() + long(v.offset + v.count));
    float largest = 0.0f;
    for (float x : w) largest = std::max(largest, std::fabs(x));
    EXPECT_TRUE(all_close(v.name, g, w, 0.0, rel * largest + 1e-7));
  }
}

}  // namespace mlpd::gpu_test
