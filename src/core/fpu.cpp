#include "core/fpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace mlpd {

namespace {
constexpr unsigned kFtz = 0x8000;  // MXCSR flush-to-zero
constexpr unsigned kDaz = 0x0040;  // MXCSR denormals-are-zero
}  // namespace

bool enable_flush_denormals() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_setcsr(_mm_getcsr() | kFtz | kDaz);
#endif
  return denormals_flushed();
}

bool denormals_flushed() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned m = _mm_getcsr();
  return (m & kFtz) && (m & kDaz);
#else
  return false;
#endif
}

}  // namespace mlpd
