#include "datasets/prefetcher.h"

#include <algorithm>
#include <string>

#include "core/check.h"
#include "core/fpu.h"

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
  stopping_ = pending_ = job_ = ready_ = false;
  slot_ = 0;
  error_ = nullptr;
  thread_ = std::thread([this] { run(); });
}

void BatchPrefetcher::request(int epoch, const int64_t* indices, int n) {
  MLPD_CHECK(thread_.joinable(), "BatchPrefetcher::request before start");
  MLPD_CHECK(n >= 0 && n <= max_batch_,
             "BatchPrefetcher::request: batch of " + std::to_string(n) + " exceeds max " + std::to_string(max_batch_));
  std::lock_guard<std::mutex> lock(mu_);
  MLPD_CHECK(!pending_, "BatchPrefetcher::request while another request is outstanding (call wait first)");
  std::copy(indices, indices + n, idx_[slot_].begin());
  epoch_ = epoch;
  n_ = n;
  pending_ = job_ = true;
  ready_ = false;
  cv_.notify_all();
}

PrefetchedBatch BatchPrefetcher::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  MLPD_CHECK(pending_, "BatchPrefetcher::wait without a request");
  cv_.wait(lock, [this] { return ready_; });
  pending_ = false;
  ready_ = false;
  const int s = slot_;
  slot_ ^= 1;  // the next request fills the other buffer while the caller uses this one
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
  return PrefetchedBatch{images_[s], y_[s].data(), n_};
}

void BatchPrefetcher::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  pending_ = job_ = ready_ = false;
}

void BatchPrefetcher::run() {
  enable_flush_denormals();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || job_; });
    if (stopping_) return;
    job_ = false;
    const int s = slot_, epoch = epoch_, n = n_;
    lock.unlock();
    std::exception_ptr err;
    try {
      fill_image_batch(*data_, idx_[s].data(), n, aug_, seed_, epoch, images_[s], y_[s].data());
    } catch (...) {
      err = std::current_exception();
    }
    lock.lock();
    error_ = err;
    ready_ = true;
    cv_.notify_all();
  }
}

}  // namespace mlpd
