#include "kernels/op_table.h"

#include "core/check.h"
#ifdef MLPD_HAVE_CUDA
#include "kernels/cuda/ops.h"
#endif

namespace mlpd {

const OpTable& cpu_ops() {
#define MLPD_OP_CPU(name) t.name = &::mlpd::name;
  static const OpTable table = [] {
    OpTable t;
    t.device = Device::cpu;
    MLPD_FOR_EACH_OP(MLPD_OP_CPU)
    return t;
  }();
#undef MLPD_OP_CPU
  return table;
}

const OpTable& cuda_ops() {
#ifdef MLPD_HAVE_CUDA
#define MLPD_OP_CUDA(name) t.name = &::mlpd::cuda::name;
  static const OpTable table = [] {
    OpTable t;
    t.device = Device::cuda;
    MLPD_FOR_EACH_OP(MLPD_OP_CUDA)
    return t;
  }();
#undef MLPD_OP_CUDA
  return table;
#else
  throw UserError("--device cuda: this build has no CUDA (configure where nvcc, cuBLAS and NCCL are found)");
#endif
}

const OpTable& ops_for(Device d) { return d == Device::cuda ? cuda_ops() : cpu_ops(); }

}  // namespace mlpd
