// The one CUB algorithm kernels/cuda uses, for the emulator: a stable ascending sort of (key,
// value) pairs over all the key's bits, as cub::DeviceRadixSort::SortPairs gives (a radix sort is
// stable, and orders signed keys by value).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <vector>

namespace cub {

struct DeviceRadixSort {
  template <class Key, class Value>
  static cudaError_t SortPairs(void* temp, size_t& temp_bytes, const Key* keys_in, Key* keys_out,
                               const Value* values_in, Value* values_out, int n, int begin_bit = 0,
                               int end_bit = int(sizeof(Key) * 8), cudaStream_t = nullptr) {
    if (begin_bit != 0 || end_bit != int(sizeof(Key) * 8)) return cudaErrorInvalidValue;  // not emulated
    if (temp == nullptr) {
      temp_bytes = 16;  // the real call always asks for some
      return cudaSuccess;
    }
    std::vector<int> order(size_t(n > 0 ? n : 0));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return keys_in[a] < keys_in[b]; });
    std::vector<Key> k(order.size());
    std::vector<Value> v(order.size());
    for (size_t i = 0; i < order.size(); ++i) k[i] = keys_in[order[i]], v[i] = values_in[order[i]];
    std::copy(k.begin(), k.end(), keys_out);
    std::copy(v.begin(), v.end(), values_out);
    return cudaSuccess;
  }
};

}  // namespace cub
