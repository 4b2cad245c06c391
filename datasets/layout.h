// Names of the mlperf-dist HDF5 dataset layout (datasets/README.md describes it): one place for
// every group, dataset and attribute name, so writers and readers cannot drift apart.
#pragma once
#include <cstdint>

namespace mlpd::layout {

inline constexpr const char* kFormatName = "mlperf-dist-hdf5";
inline constexpr int64_t kFormatVersion = 1;

// Root attributes.
inline constexpr const char* kAttrFormat = "format";
inline constexpr const char* kAttrFormatVersion = "format_version";
inline constexpr const char* kAttrBenchmark = "benchmark";
inline constexpr const char* kAttrScale = "scale";
inline constexpr const char* kAttrNumClasses = "num_classes";
inline constexpr const char* kAttrClassNames = "class_names";  // comma-separated, index order
inline constexpr const char* kAttrSource = "source";
inline constexpr const char* kAttrLicence = "licence";
inline constexpr const char* kAttrCreatedBy = "created_by";

// Groups (splits) and their datasets.
inline constexpr const char* kTrain = "train";
inline constexpr const char* kEval = "eval";
inline constexpr const char* kImages = "images";  // uint8 [N,H,W,C], chunked along N
inline constexpr const char* kLabels = "labels";  // int32 [N]

// Per-split attributes.
inline constexpr const char* kAttrCount = "count";
inline constexpr const char* kAttrHeight = "height";
inline constexpr const char* kAttrWidth = "width";
inline constexpr const char* kAttrChannels = "channels";
inline constexpr const char* kAttrSourceFiles = "source_files";
inline constexpr const char* kAttrMean = "mean";  // /train only: pixel mean in [0,1] units
inline constexpr const char* kAttrStd = "std";    // /train only: pixel standard deviation

}  // namespace mlpd::layout
