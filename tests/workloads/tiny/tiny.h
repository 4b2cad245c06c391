// The tiny test workload (see tiny_entry.cpp).
#pragma once
#include "workloads/registry.h"

namespace mlpd {

inline constexpr int64_t kTinyEvalSamples = 600;
inline constexpr int64_t kTinyTrainSamples = 496;  // samples per generation: 8 steps of 48, 64, 80, 48, ...

const WorkloadEntry& tiny_entry();
std::unique_ptr<Workload> make_tiny_workload(const WorkloadContext& ctx, const nlohmann::json& config);

}  // namespace mlpd
