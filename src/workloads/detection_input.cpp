#include "workloads/detection_input.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/check.h"

namespace mlpd {

void DetectionInput::start(Fill fill, int max_batch, size_t image_floats, Device device) {
  MLPD_CHECK(fill != nullptr && max_batch > 0, "DetectionInput::start: no fill or no batch");
  job_.stop();
  fill_ = std::move(fill);
  max_batch_ = max_batch;
  image_floats_ = image_floats;
  for (Slot& s : slots_) {
    s.idx.assign(size_t(max_batch), 0);
    s.staged = device == Device::cpu ? no_device_bytes()
                                     : alloc_staging(device, size_t(max_batch) * image_floats * sizeof(float));
  }
  current_ = 1;
  pending_ = MicroBatchKey{};
}

void DetectionInput::fill_slot(int slot, int epoch, int n) {
  Slot& s = slots_[slot];
  fill_(slot, epoch, s.idx.data(), n);
  if (s.staged) std::memcpy(s.staged.get(), s.batch.x.data(), size_t(n) * image_floats_ * sizeof(float));
}

int DetectionInput::get(const MicroBatchKey& key, const int64_t* idx, int n) {
  MLPD_CHECK(fill_ != nullptr, "DetectionInput::get before start");
  MLPD_CHECK(n >= 0 && n <= max_batch_, "DetectionInput::get: a micro-batch past the slots' size");
  const int s = 1 - current_;
  if (job_.pending()) {
    const bool hit = pending_ == key;
    pending_ = MicroBatchKey{};
    job_.wait();  // a fill error surfaces here
    if (hit) {
      current_ = s;
      return s;
    }
  }
  std::copy(idx, idx + n, slots_[s].idx.begin());
  fill_slot(s, key.epoch, n);
  current_ = s;
  return s;
}

void DetectionInput::prefetch(const MicroBatchKey& key, const int64_t* idx, int n) {
  MLPD_CHECK(fill_ != nullptr, "DetectionInput::prefetch before start");
  MLPD_CHECK(n >= 0 && n <= max_batch_, "DetectionInput::prefetch: a micro-batch past the slots' size");
  MLPD_CHECK(!job_.pending(), "DetectionInput::prefetch while another is outstanding");
  const int s = 1 - current_;
  std::copy(idx, idx + n, slots_[s].idx.begin());
  pending_ = key;
  const int epoch = key.epoch;
  job_.submit([this, s, epoch, n] { fill_slot(s, epoch, n); });
}

const float* DetectionInput::images(int slot) const {
  const Slot& s = slots_[slot];
  return s.staged ? reinterpret_cast<const float*>(s.staged.get()) : s.batch.x.data();
}

}  // namespace mlpd
