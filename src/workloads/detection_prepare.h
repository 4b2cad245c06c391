// What `prepare` does for the detection workloads (ssd, maskrcnn): at the mini scale the
// Fashion-MNIST scenes (src/detection/scenes.h), at the reference scale COCO 2017
// (src/detection/coco_convert.h), written for `benchmark`.
#pragma once
#include "workloads/registry.h"

namespace mlpd {

// coco_image_size: the side COCO images are resized to when the request names none.
void prepare_detection_data(const PrepareRequest& r, const char* benchmark, int coco_image_size);

}  // namespace mlpd
