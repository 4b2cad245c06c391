// One flat parameter buffer and one flat gradient buffer per model; layers hold named views
// (offsets) into them. Broadcast, allreduce, checkpoint and optimizer are loops over contiguous
// memory. Non-trained state (batch-norm running statistics) lives in a third flat buffer that is
// checkpointed but never reduced.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace mlpd {

enum class ParamKind : uint8_t {
  weight,   // conv/linear weights: weight decay applies, LARS trust ratio applies
  bias,     // biases, batch-norm gamma/beta: MLPerf excludes them from decay and LARS scaling
};

struct ParamView {
  std::string name;
  size_t offset = 0;  // in floats, into ParamStore::params / grads
  size_t count = 0;
  ParamKind kind = ParamKind::weight;
};

struct StateView {
  std::string name;
  size_t offset = 0;  // in floats, into ParamStore::state
  size_t count = 0;
};

// On the CPU the three host vectors are the buffers. On a GPU (kernels/device.h:
// place_store_on) the working buffers are device memory and the host vectors `params` and `state`
// are mirrors, current only after download_store (checkpoints, logs, fingerprints); `grads` is
// then empty. Code that may run on either device reaches the buffers through params_data,
// grads_data, state_data and the *_ptr views below.
struct ParamStore {
  std::vector<ParamView> views;     // in registration (= forward) order
  std::vector<StateView> state_views;
  std::vector<float> params;        // sized by finalize_params()
  std::vector<float> grads;
  std::vector<float> state;
  size_t param_count = 0;
  size_t state_count = 0;
  bool finalized = false;
  Device device = Device::cpu;
  DeviceBytes device_memory = no_device_bytes();  // params | grads | state, on a GPU
  float* device_params = nullptr;
  float* device_grads = nullptr;
  float* device_state = nullptr;
};

inline bool on_device(const ParamStore& s) { return s.device != Device::cpu; }
inline float* params_data(ParamStore& s) { return on_device(s) ? s.device_params : s.params.data(); }
inline const float* params_data(const ParamStore& s) { return on_device(s) ? s.device_params : s.params.data(); }
inline float* grads_data(ParamStore& s) { return on_device(s) ? s.device_grads : s.grads.data(); }
inline float* state_data(ParamStore& s) { return on_device(s) ? s.device_state : s.state.data(); }

// Registers a parameter during model build; returns its index into `views`.
// Offsets are 16-float aligned so each view starts on a 64-byte boundary.
size_t add_param(ParamStore& s, std::string name, size_t count, ParamKind kind);
size_t add_state(ParamStore& s, std::string name, size_t count);
// Allocates (and touches) the three buffers, zeroed. No add_* after this.
void finalize_params(ParamStore& s);

inline float* param_ptr(ParamStore& s, size_t view) { return params_data(s) + s.views[view].offset; }
inline const float* param_ptr(const ParamStore& s, size_t view) { return params_data(s) + s.views[view].offset; }
inline float* grad_ptr(ParamStore& s, size_t view) { return grads_data(s) + s.views[view].offset; }
inline float* state_ptr(ParamStore& s, size_t view) { return state_data(s) + s.state_views[view].offset; }

// A bitwise fingerprint of the (host) parameters (FNV-1a over the bytes): for determinism checks.
uint64_t params_fingerprint(const ParamStore& s);

}  // namespace mlpd
