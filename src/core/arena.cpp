#include "core/arena.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/check.h"

namespace mlpd {

void arena_init(Arena& a, size_t bytes) {
  bytes = (bytes + 63) & ~size_t(63);
  void* p = std::aligned_alloc(64, bytes == 0 ? 64 : bytes);
  MLPD_CHECK(p != nullptr, "arena: cannot allocate " + std::to_string(bytes) + " bytes");
  std::memset(p, 0, bytes);  // touch every page now, outside the timed step
  a.base = {static_cast<std::byte*>(p), [](std::byte* q) { std::free(q); }};
  a.capacity = bytes;
  a.offset = 0;
}

void* arena_bytes(Arena& a, size_t bytes) {
  size_t start = (a.offset + 63) & ~size_t(63);
  MLPD_CHECK(start + bytes <= a.capacity, "arena too small: need " + std::to_string(start + bytes) +
                                              " bytes, have " + std::to_string(a.capacity));
  a.offset = start + bytes;
  if (a.offset > a.high_water) a.high_water = a.offset;
  return a.base.get() + start;
}

float* arena_floats(Arena& a, size_t count) {
  return static_cast<float*>(arena_bytes(a, count * sizeof(float)));
}

}  // namespace mlpd
