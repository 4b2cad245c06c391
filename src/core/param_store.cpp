#include "core/param_store.h"

#include <cstring>

#include "core/check.h"

namespace mlpd {

namespace {
size_t align16(size_t n) { return (n + 15) & ~size_t(15); }
}  // namespace

size_t add_param(ParamStore& s, std::string name, size_t count, ParamKind kind) {
  MLPD_CHECK(!s.finalized, "add_param after finalize_params: " + name);
  s.views.push_back(ParamView{std::move(name), s.param_count, count, kind});
  s.param_count += align16(count);
  return s.views.size() - 1;
}

size_t add_state(ParamStore& s, std::string name, size_t count) {
  MLPD_CHECK(!s.finalized, "add_state after finalize_params: " + name);
  s.state_views.push_back(StateView{std::move(name), s.state_count, count});
  s.state_count += align16(count);
  return s.state_views.size() - 1;
}

void finalize_params(ParamStore& s) {
  s.params.assign(s.param_count, 0.0f);
  s.grads.assign(s.param_count, 0.0f);
  s.state.assign(s.state_count, 0.0f);
  s.finalized = true;
}

uint64_t params_fingerprint(const ParamStore& s) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = reinterpret_cast<const unsigned char*>(s.params.data());
  for (size_t i = 0; i < s.params.size() * sizeof(float); ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace mlpd
