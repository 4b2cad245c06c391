// The collectives the trainer needs, on host buffers. Counts may exceed INT_MAX: calls are split.
// Gradients are not reduced here: the bucketed communicator (communicator.h) is their one path.
#pragma once
#include <cstddef>
#include <cstdint>

#include "comm/world.h"
#include "core/param_store.h"

namespace mlpd {

void broadcast_floats(const World& w, float* data, size_t n, int root);
void broadcast_bytes(const World& w, void* data, size_t n, int root);
void allreduce_sum_floats(const World& w, float* data, size_t n);
void allreduce_sum_doubles(const World& w, double* data, size_t n);
void allreduce_sum_i64(const World& w, int64_t* data, size_t n);
double allreduce_max(const World& w, double v);
void barrier(const World& w);

// Rank 0's parameters (and non-trained state) become everyone's.
void broadcast_parameters(const World& w, ParamStore& s);

}  // namespace mlpd
