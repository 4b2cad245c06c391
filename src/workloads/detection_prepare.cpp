#include "workloads/detection_prepare.h"

#include <spdlog/spdlog.h>

#include "core/check.h"
#include "datasets/fashion_mnist.h"
#include "detection/coco_convert.h"
#include "detection/scenes.h"

namespace mlpd {

void prepare_detection_data(const PrepareRequest& r, const char* benchmark, int coco_image_size) {
  if (r.scale != "mini") {
    const std::string dir = !r.coco_dir.empty() ? r.coco_dir : r.from;
    if (dir.empty())
      throw UserError(std::string("prepare ") + benchmark +
                          " --scale reference: give the COCO 2017 directory with --coco DIR (annotations/, "
                          "train2017/, val2017/)",
                      2);
    CocoConvertOptions o;
    o.coco_dir = dir;
    o.image_size = r.image_size > 0 ? r.image_size : coco_image_size;
    spdlog::info("prepare: COCO 2017 from {} -> {} (images resized to {}x{})", dir, r.output, o.image_size,
                 o.image_size);
    const CocoConvertStats st = prepare_coco(o, r.output, benchmark);
    spdlog::info("prepare: {} train images ({} instances), {} val images ({} instances)", st.train_images,
                 st.train_instances, st.eval_images, st.eval_instances);
    return;
  }
  SceneOptions o;
  o.fashion_mnist_dir = r.from.empty() ? kFashionMnistDebianDir : r.from;
  spdlog::info("prepare: scenes of Fashion-MNIST items from {} -> {} ({} train, {} eval, {}x{}, seed {})",
               o.fashion_mnist_dir, r.output, o.train_scenes, o.eval_scenes, o.size, o.size, o.seed);
  const SceneStats st = prepare_scenes(o, r.output, benchmark);
  spdlog::info("prepare: {} train and {} eval instances ({} items dropped as mostly hidden)", st.train_instances,
               st.eval_instances, st.dropped);
}

}  // namespace mlpd
