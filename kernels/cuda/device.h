// What the CUDA side can tell without a GPU: versions, and how many devices there are.
#pragma once

namespace mlpd::cuda {

// Number of usable GPUs; 0 when there is no driver or no device (any runtime error means none).
int device_count();
// Versions of the libraries we linked, e.g. 22809 for NCCL 2.28.9; 0 where not linked.
int nccl_version();
int cudnn_version();

}  // namespace mlpd::cuda
