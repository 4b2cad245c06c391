#include "datasets/prefetcher.h"

#include <algorithm>
#include <string>

#include "core/check.h"

namespace mlpd {

BatchPrefetcher::~BatchPrefetcher() { stop(); }

void BatchPrefetcher::start(const ImageSplit* data, const AugmentSpec& aug, uint64_t seed, int max_batch,
                            ImageAlloc image_alloc) {
  MLPD_CHECK(data != nullptr, "BatchPrefetcher::start: no data");
  MLPD_CHECK(max_batch > 0, "BatchPrefetcher::start: max_batch must be positive");
  stop();
  data_ = data;
  aug_ = aug;
  seed_ = seed;
  max_batch_ = max_batch;
  sample_floats_ = static_cast<size_t>(data->h) * data->w * data->c;
  for (int s = 0; s < 2; ++s) {
    const size_t floats = sample_floats_ * static_cast<size_t>(max_batch);
    if (image_alloc) {
      staged_[s] = image_alloc(floats * sizeof(float));
      images_[s] = reinterpret_cast<float*>(staged_[s].get());
    } else {
      x_[s].assign(floats, 0.0f);  // allocated and touched once, here
      images_[s] = x_[s].data();
    }
    y_[s].assign(max_batch, 0);
    idx_[s].assign(max_batch, 0);
  }
  slot_ = 0;
  started_ = true;
}

void BatchPrefetcher::request(int epoch, const int64_t* indices, int n) {
  MLPD_CHECK(started_, "BatchPrefetcher::request before start");
  MLPD_CHECK(n >= 0 && n <= max_batch_,
             "BatchPrefetcher::request: batch of " + std::to_string(n) + " exceeds max " + std::to_string(max_batch_));
  MLPD_CHECK(!job_.pending(), "BatchPrefetcher::request while another request is outstanding (call wait first)");
  const int s = slot_;
  std::copy(indices, indices + n, idx_[s].begin());
  n_ = n;
  job_.submit([this, s, epoch, n] {
    fill_image_batch(*data_, idx_[s].data(), n, aug_, seed_, epoch, images_[s], y_[s].data());
  });
}

PrefetchedBatch BatchPrefetcher::wait() {
  MLPD_CHECK(job_.pending(), "BatchPrefetcher::wait without a request");
  const int s = slot_;
  slot_ ^= 1;  // the next request fills the other buffer while the caller uses this one
  job_.wait();  // rethrows a fill error
  return PrefetchedBatch{images_[s], y_[s].data(), n_};
}

void BatchPrefetcher::stop() {
  job_.stop();
  started_ = false;
}

}  // namespace mlpd
