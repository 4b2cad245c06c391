// Denormal floats slowed a CPU training run here by up to 45% late in training: every thread
// that computes sets flush-to-zero and denormals-are-zero.
#pragma once

namespace mlpd {

// Sets FTZ and DAZ in this thread's MXCSR; returns true if both bits are now set.
bool enable_flush_denormals();
bool denormals_flushed();

}  // namespace mlpd
