#include "scaling/device.h"

#include <cstdio>

#include "core/check.h"

namespace mlpd::scaling {

namespace {

// ResNet-50 v1.5: 25,557,032 trainable parameters (torchvision's resnet50, ResNet50_Weights
// "num_params"; "25.6M" in He et al. 2016). Every one of them has a gradient in the allreduce.
constexpr double kResnet50Params = 25557032;
const char* kResnet50ParamsSource = "ResNet-50 v1.5: 25,557,032 parameters (torchvision resnet50 num_params)";

}  // namespace

const std::vector<DeviceFigure>& device_figures() {
  static const std::vector<DeviceFigure> f = {
      {"resnet", "a100", 2470, 256, kResnet50Params, "nvlink3",
       "A100 80GB: 2470 img/s per GPU, mixed precision, batch 256 per GPU, 1 GPU (NVIDIA DeepLearningExamples, "
       "PyTorch/Classification/ConvNets/resnet50v1.5/README.md, 'Training performance: NVIDIA DGX A100 (8x A100 "
       "80GB)', pytorch-21.03 NGC container)",
       kResnet50ParamsSource},
      // Derived: MLPerf Training v3.0 closed, result 3.0-2053 (8x H100 SXM5 80GB, MXNet, 13.466 min
      // to 75.9% top-1), as listed on
      // developer.nvidia.com/deep-learning-performance-training-inference/training. Throughput =
      // 1,281,167 images x 35.2 epochs (the RCP mean at batch 3264, an assumption: the submission's
      // own batch and epochs are in its log, not here) / 807.96 s / 8 GPUs = 6977 img/s. A lower
      // bound: the time to train also holds the evaluations.
      {"resnet", "h100", 6977, 0, kResnet50Params, "nvlink4",
       "H100 SXM5 80GB: ~6977 img/s per GPU, derived from MLPerf Training v3.0 result 3.0-2053 (8x H100, 13.466 "
       "min) assuming 35.2 epochs (RCP mean at batch 3264); a lower bound (the time includes evaluation)",
       kResnet50ParamsSource},
  };
  return f;
}

const DeviceFigure& find_device_figure(const std::string& benchmark, const std::string& device) {
  std::string known;
  for (const DeviceFigure& f : device_figures()) {
    if (f.benchmark != benchmark) continue;
    if (f.device == device) return f;
    known += (known.empty() ? "" : ", ") + f.device;
  }
  if (known.empty())
    throw UserError("no published device figure for " + benchmark +
                        " (only resnet has one): pass --profile scale.json from `mlperf-dist scale`",
                    2);
  throw UserError("unknown --device-profile '" + device + "' for " + benchmark + " (known: " + known + ")", 2);
}

ScalingProfile device_profile(const DeviceFigure& f, double wire_bytes_per_param, AllreduceAlgo algo) {
  ScalingProfile p;
  p.seconds_per_sample = 1.0 / f.samples_per_s;
  p.grad_bytes = f.parameters * wire_bytes_per_param;
  p.algo = algo;
  char buf[128];
  std::snprintf(buf, sizeof buf, "; gradients %.0f x %g B on the wire", f.parameters, wire_bytes_per_param);
  p.source = f.source + "; " + f.params_source + buf;
  return p;
}

}  // namespace mlpd::scaling
