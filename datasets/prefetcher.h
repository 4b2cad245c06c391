// Double-buffered batch preparation: a background thread (BackgroundJob) fills the next batch
// (normalise, augment: fill_image_batch) while the caller trains on the current one.
//
//   BatchPrefetcher pf;
//   pf.start(&train, aug, seed, max_batch);
//   pf.request(epoch, idx(0), n);
//   for (b = 0; b < B; ++b) {
//     PrefetchedBatch batch = pf.wait();           // batch b, filled in the background
//     if (b + 1 < B) pf.request(epoch, idx(b + 1), n);  // starts filling the other buffer
//     train_step(batch.x, batch.y, batch.n);
//   }
//
// At most one request is outstanding: request() and wait() alternate. The pointers wait() returns
// stay valid until the next wait() (the next request fills the other buffer).
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "datasets/background_job.h"
#include "datasets/image_dataset.h"

namespace mlpd {

struct PrefetchedBatch {
  float* x = nullptr;    // [n, h, w, c]
  int32_t* y = nullptr;  // [n]
  int n = 0;
};

class BatchPrefetcher {
 public:
  BatchPrefetcher() = default;
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // Allocates both buffers for max_batch samples and starts the thread (which sets FTZ/DAZ).
  // `data` must outlive the prefetcher (or the next start/stop). Restarts if already started.
  // image_alloc (optional) allocates the image buffers: page-locked memory for a GPU run
  // (kernels/device.h alloc_staging), so that a batch's copy to the device runs asynchronously.
  using ImageAlloc = DeviceBytes (*)(size_t bytes);
  void start(const ImageSplit* data, const AugmentSpec& aug, uint64_t seed, int max_batch,
             ImageAlloc image_alloc = nullptr);
  // Starts filling samples indices[0..n) of `epoch` into the free buffer; the indices are copied.
  // Throws if not started, n > max_batch, or a request is already outstanding.
  void request(int epoch, const int64_t* indices, int n);
  // Blocks until the requested batch is ready and returns it; rethrows a fill error.
  PrefetchedBatch wait();
  // Joins the thread (also done by the destructor).
  void stop();

 private:
  const ImageSplit* data_ = nullptr;
  AugmentSpec aug_{};
  uint64_t seed_ = 0;
  int max_batch_ = 0;
  size_t sample_floats_ = 0;

  std::vector<float> x_[2];          // the image buffers, unless image_alloc gave staged_
  DeviceBytes staged_[2] = {no_device_bytes(), no_device_bytes()};
  float* images_[2] = {nullptr, nullptr};
  std::vector<int32_t> y_[2];
  std::vector<int64_t> idx_[2];

  BackgroundJob job_;
  bool started_ = false;
  int slot_ = 0;  // buffer of the pending (or next) request
  int n_ = 0;
};

}  // namespace mlpd
