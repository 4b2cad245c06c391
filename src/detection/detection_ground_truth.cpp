#include "detection/detection_ground_truth.h"

namespace mlpd {

CocoGroundTruth detection_ground_truth(const DetectionSplit& s, bool with_masks) {
  CocoGroundTruth gt;
  for (int k = 1; k <= s.num_classes; ++k) gt.category_ids.push_back(k);
  int64_t next_id = 1;
  for (int64_t i = 0; i < s.count; ++i) {
    gt.images.push_back({s.image_ids[size_t(i)], s.h, s.w});
    for (int64_t j = s.inst_first[size_t(i)]; j < s.inst_first[size_t(i) + 1]; ++j) {
      CocoAnnotation a;
      a.id = next_id++;
      a.image_id = s.image_ids[size_t(i)];
      a.category_id = s.classes[size_t(j)];
      for (int k = 0; k < 4; ++k) a.bbox[k] = s.boxes[size_t(j) * 4 + size_t(k)];
      a.area = s.area[size_t(j)];
      a.iscrowd = s.iscrowd[size_t(j)] != 0;
      if (with_masks) {
        a.has_mask = true;
        a.mask = instance_mask(s, j);
      }
      gt.annotations.push_back(std::move(a));
    }
  }
  return gt;
}

}  // namespace mlpd
