// A detection workload's training micro-batches (ssd, maskrcnn), each filled one ahead in the
// background while the step trains on the one before: the images and whatever the workload
// prepares per batch on the host (ssd: its random crops; maskrcnn: the targets with their masks
// decoded). Two slots; on a GPU run each slot's images are also copied, in the background, into
// page-locked memory, so that the step's copy to the device does not hold the host.
//
//   input.start(fill, max_batch, image_floats, device, layout);
//   for each micro-batch (epoch, batch, micro):
//     const TrainSlot t = input.take(epoch, batch, micro, perm);  // prefetched, or filled now; and
//                                                                  // the next one of the epoch starts
//     train(input.images(t.slot), input.batch(t.slot), t.slice);   // valid until the next take()
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "datasets/background_job.h"
#include "datasets/sampling.h"
#include "detection/detection_data.h"
#include "kernels/device.h"

namespace mlpd {

// Which micro-batch: micro-batch `micro` of this rank in global batch `batch` of `epoch`.
struct MicroBatchKey {
  int epoch = -1;
  int64_t batch = -1;
  int micro = -1;
  bool operator==(const MicroBatchKey&) const = default;
};

// How a rank's micro-batches lie in an epoch: micro-batch m of rank r is "virtual rank" r*M+m of
// ranks*M (as in resnet), so M micro-batches per rank see the samples (and batch-norm groups) of M
// times as many ranks.
struct MicroBatchLayout {
  int rank = 0, ranks = 1, micro_batches = 1;
  int64_t global_batch = 1, batches_per_epoch = 1;
};
// Positions in the epoch's permutation of micro-batch `micro` of global batch `batch`.
Slice micro_batch_slice(const MicroBatchLayout& l, int64_t batch, int micro);

struct TrainSlot {
  int slot = 0;
  Slice slice;  // its positions in the epoch's permutation
};

class DetectionInput {
 public:
  // fill(slot, epoch, idx, n): fills batch(slot) with images idx[0..n) of `epoch`, and the
  // workload's own per-slot data. It runs on the background thread for a prefetch, on the caller's
  // for a micro-batch that was not prefetched, and touches nothing of the other slot.
  using Fill = std::function<void(int slot, int epoch, const int64_t* idx, int n)>;
  void start(Fill fill, int max_batch, size_t image_floats, Device device, const MicroBatchLayout& layout);
  // Micro-batch (epoch, batch, micro) of the layout, images perm[its slice]: get(), then a
  // prefetch of the micro-batch after it in the epoch, if any (perm: the epoch's permutation).
  TrainSlot take(int epoch, int64_t batch, int micro, const int64_t* perm);
  // The slot holding micro-batch `key`, images idx[0..n): the prefetched one when it is that
  // micro-batch, else filled now (a prefetch of another one is waited for and dropped).
  int get(const MicroBatchKey& key, const int64_t* idx, int n);
  // Starts filling micro-batch `key` into the slot get() did not return.
  void prefetch(const MicroBatchKey& key, const int64_t* idx, int n);
  DetectionBatch& batch(int slot) { return slots_[slot].batch; }
  // batch(slot)'s images where the model reads them: page-locked on a GPU run.
  const float* images(int slot) const;

 private:
  void fill_slot(int slot, int epoch, int n);

  struct Slot {
    DetectionBatch batch;
    DeviceBytes staged = no_device_bytes();
    std::vector<int64_t> idx;
  };
  Slot slots_[2];
  Fill fill_;
  MicroBatchLayout layout_;
  int max_batch_ = 0;
  size_t image_floats_ = 0;
  int current_ = 1;         // the slot get() returned last
  MicroBatchKey pending_;   // what the job is filling into the other slot
  BackgroundJob job_;       // last: joined before the slots go
};

}  // namespace mlpd
