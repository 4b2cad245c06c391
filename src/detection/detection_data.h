// Detection datasets (ssd, maskrcnn) in the mlperf-dist HDF5 layout (datasets/README.md, "Detection
// splits"): per split the images, and per image its instances (box, class, crowd flag, area, and the
// mask as COCO RLE). Written by the scene generator (scenes.h) and the COCO converter
// (coco_convert.h); read whole into memory by each rank.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "detection/rle.h"

namespace mlpd {

namespace detection_layout {
inline constexpr const char* kImageIds = "image_ids";    // int64 [N]
inline constexpr const char* kInstFirst = "inst_first";  // int64 [N+1]: image i owns instances [first[i], first[i+1])
inline constexpr const char* kBoxes = "boxes";           // float32 [M,4]: x, y, w, h in pixels (COCO)
inline constexpr const char* kClasses = "classes";       // int32 [M]: 1..num_classes (0 is background)
inline constexpr const char* kIsCrowd = "iscrowd";       // uint8 [M]
inline constexpr const char* kArea = "area";             // float32 [M]: mask pixels (COCO's area)
inline constexpr const char* kMaskFirst = "mask_first";  // int64 [M+1]: instance j's RLE counts
inline constexpr const char* kMaskCounts = "mask_counts";  // uint32 [total]
}  // namespace detection_layout

struct DetectionSplit {
  int64_t count = 0;  // images
  int h = 0, w = 0, c = 0;
  int num_classes = 0;  // background excluded
  double mean = 0.0, std = 1.0;  // training pixels, [0,1] units
  std::vector<uint8_t> images;   // [count, h, w, c]
  std::vector<int64_t> image_ids, inst_first, mask_first;
  std::vector<float> boxes, area;
  std::vector<int32_t> classes;
  std::vector<uint8_t> iscrowd;
  std::vector<uint32_t> mask_counts;
  std::vector<std::string> class_names;
};

// The instance's mask at the image's size.
Rle instance_mask(const DetectionSplit& s, int64_t instance);

// Everything of one split ("train" or "eval"), checked: shapes, offsets monotone and in range,
// classes in 1..K, each RLE summing to h*w. UserError (exit 2) naming the file and dataset.
DetectionSplit load_detection_split(const std::string& path, const std::string& split);
// The same checks on both splits, without keeping the pixels: run before training starts.
void check_detection_data(const std::string& path);

// What a writer hands over for one split.
struct DetectionSplitData {
  int64_t count = 0;
  int h = 0, w = 0, c = 0;
  std::vector<uint8_t> images;
  std::vector<int64_t> image_ids, inst_first;
  std::vector<float> boxes, area;
  std::vector<int32_t> classes;
  std::vector<uint8_t> iscrowd;
  std::vector<Rle> masks;
};
struct DetectionFileInfo {
  std::string benchmark, scale, source, licence, created_by;
  std::vector<std::string> class_names;
  std::vector<std::pair<std::string, std::string>> extra_attrs;  // more root attributes (strings)
};
// Writes the file atomically (temp + rename); train statistics (mean, std) computed here.
void write_detection_file(const std::string& out_h5, const DetectionFileInfo& info, const DetectionSplitData& train,
                          const DetectionSplitData& eval);

// Writes a detection file split by split and image by image, for data that does not fit in memory
// (COCO): pixels go to the file as they come; instance fields are kept until the split ends. Write
// into a temporary path (write_h5_atomically) and call close() last.
struct DetectionInstance {
  float box[4] = {0, 0, 0, 0};  // x, y, w, h in pixels
  int32_t cls = 0;
  bool iscrowd = false;
  float area = 0;
  Rle mask;
};
class DetectionWriter {
 public:
  DetectionWriter(const std::string& path, const DetectionFileInfo& info);
  ~DetectionWriter();
  DetectionWriter(const DetectionWriter&) = delete;
  DetectionWriter& operator=(const DetectionWriter&) = delete;
  void begin_split(const char* name, int64_t images, int h, int w, int c);
  void add_image(int64_t image_id, const uint8_t* pixels, const std::vector<DetectionInstance>& instances);
  // mean, std: the training pixels' (the caller knows them: pixel_stats of the train split).
  void end_split(double mean, double std);
  // Mean and standard deviation, [0,1] units, of the pixels added to the current split so far.
  std::pair<double, double> pixel_stats() const;
  void close();

 private:
  struct State;
  State* s_;
};

// A batch as the detectors take it.
struct DetectionBatch {
  int n = 0;
  std::vector<float> x;             // [n, h, w, c]: (p/255 - mean) / std
  std::vector<float> gt_boxes;      // [G, 4]: x1, y1, x2, y2 normalized by the image's w, h
  std::vector<int32_t> gt_labels;   // [G]: 1..K
  std::vector<int32_t> gt_first;    // [n+1]
  std::vector<int64_t> gt_instance; // [G]: the split's instance index (for masks)
  std::vector<uint8_t> flipped;     // [n]
};
// Images idx[0..n) of the split; train_augment: horizontal flip with probability 1/2, a function of
// (seed, epoch, image index). Crowd instances are left out. Buffers are reused.
void fill_detection_batch(const DetectionSplit& s, const int64_t* idx, int n, bool train_augment, uint64_t seed,
                          int epoch, DetectionBatch& out);

}  // namespace mlpd
