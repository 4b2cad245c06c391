// Embedding lookups: gather rows of a table into a batch, and the backward scatter-add of a
// batch's row gradients into the table's gradient. Same signatures on CPU (kernels/cpu/embedding.cpp)
// and, when written, CUDA (kernels/cuda/embedding.cu, namespace mlpd::cuda).
// Tables are row-major [rows, dim]; batch buffers have a leading dimension ld >= dim so that a
// gather can write straight into a column block of a wider (concatenated) activation.
#pragma once
#include <cstddef>
#include <cstdint>

namespace mlpd {

// out[i, 0:dim] = table[idx[i], 0:dim] for i < n; out row i starts at out + i*ld_out.
void embedding_gather(const float* table, int dim, const int32_t* idx, int n, float* out, int ld_out);

// dtable[idx[i], 0:dim] += src[i, 0:dim] for i < n (src row i at src + i*ld_src), in order of i:
// repeated indices accumulate, and the result is deterministic.
void embedding_scatter_add(float* dtable, int dim, const int32_t* idx, int n, const float* src, int ld_src);

}  // namespace mlpd
