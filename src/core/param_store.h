// One flat parameter buffer and one flat gradient buffer per model; layers hold named views
// (offsets) into them. Broadcast, allreduce, checkpoint and optimizer are loops over contiguous
// memory. Non-trained state (batch-norm running statistics) lives in a third flat buffer that is
// checkpointed but never reduced.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

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

struct ParamStore {
  std::vector<ParamView> views;     // in registration (= forward) order
  std::vector<StateView> state_views;
  std::vector<float> params;        // sized by finalize_params()
  std::vector<float> grads;
  std::vector<float> state;
  size_t param_count = 0;
  size_t state_count = 0;
  bool finalized = false;
};

// Registers a parameter during model build; returns its index into `views`.
// Offsets are 16-float aligned so each view starts on a 64-byte boundary.
size_t add_param(ParamStore& s, std::string name, size_t count, ParamKind kind);
size_t add_state(ParamStore& s, std::string name, size_t count);
// Allocates (and touches) the three buffers, zeroed. No add_* after this.
void finalize_params(ParamStore& s);

inline float* param_ptr(ParamStore& s, size_t view) { return s.params.data() + s.views[view].offset; }
inline const float* param_ptr(const ParamStore& s, size_t view) { return s.params.data() + s.views[view].offset; }
inline float* grad_ptr(ParamStore& s, size_t view) { return s.grads.data() + s.views[view].offset; }
inline float* state_ptr(ParamStore& s, size_t view) { return s.state.data() + s.state_views[view].offset; }

// A bitwise fingerprint of the parameters (FNV-1a over the bytes): for determinism checks.
uint64_t params_fingerprint(const ParamStore& s);

}  // namespace mlpd
