#include "workloads/detection_input.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/check.h"

namespace mlpd {

Slice micro_batch_slice(const MicroBatchLayout& l, int64_t batch, int micro) {
  return rank_slice_of_batch(batch, l.global_batch, l.rank * l.micro_batches + micro, l.ranks * l.micro_batches);
}

void DetectionInput::start(Fill fill, int max_batch, size_t image_floats, Device device,
                           const MicroBatchLayout& layout) {
  MLPD_CHECK(fill != nullptr && max_batch > 0, "DetectionInput::start: no fill or no batch");
  job_.stop();
  fill_ = std::move(fill);
  layout_ = layout;
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

TrainSlot DetectionInput::take(int epoch, int64_t batch, int micro, const int64_t* perm) {
  TrainSlot t;
  t.slice = micro_batch_slice(layout_, batch, micro);
  t.slot = get({epoch, batch, micro}, perm + t.slice.begin, static_cast<int>(t.slice.count));
  const bool next_batch = micro + 1 == layout_.micro_batches;
  if (!next_batch || batch + 1 < layout_.batches_per_epoch) {
    const int64_t nb = next_batch ? batch + 1 : batch;
    const int nm = next_batch ? 0 : micro + 1;
    const Slice ns = micro_batch_slice(layout_, nb, nm);
    prefetch({epoch, nb, nm}, perm + ns.begin, static_cast<int>(ns.count));
  }
  return t;
}

const float* DetectionInput::images(int slot) const {
  const Slot& s = slots_[slot];
  return s.staged ? reinterpret_cast<const float*>(s.staged.get()) : s.batch.x.data();
}

}  // namespace mlpd
