// A tensor is a view: shape, dtype, device and a pointer it does not own.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>

namespace mlpd {

enum class DType : uint8_t { f32, i32, u8 };
enum class Device : uint8_t { cpu, cuda };

// Bytes owned on some device, freed by the allocator that made them (kernels/device.h allocates).
using DeviceBytes = std::unique_ptr<std::byte[], void (*)(std::byte*)>;
inline DeviceBytes no_device_bytes() {
  return DeviceBytes(nullptr, [](std::byte*) {});
}

constexpr size_t dtype_size(DType t) { return t == DType::u8 ? 1 : 4; }

struct Shape {
  static constexpr int kMaxRank = 4;
  std::array<int64_t, kMaxRank> dims{};
  int rank = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d) {
    for (int64_t v : d) dims[rank++] = v;
  }
  int64_t operator[](int i) const { return dims[i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
  bool operator==(const Shape& o) const {
    if (rank != o.rank) return false;
    for (int i = 0; i < rank; ++i)
      if (dims[i] != o.dims[i]) return false;
    return true;
  }
};

struct Tensor {
  void* data = nullptr;
  Shape shape;
  DType dtype = DType::f32;
  Device device = Device::cpu;

  float* f32() const { return static_cast<float*>(data); }
  int32_t* i32() const { return static_cast<int32_t*>(data); }
  int64_t numel() const { return shape.numel(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
};

inline Tensor make_view(float* p, Shape s) { return Tensor{p, s, DType::f32, Device::cpu}; }

}  // namespace mlpd
