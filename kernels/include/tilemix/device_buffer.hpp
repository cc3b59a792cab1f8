#pragma once
// Device memory owned by a host object, and synchronous host <-> device copies (plain C++, no
// CUDA types). In a build without CUDA every operation that needs a device throws.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tilemix::gpu {

// How device memory is counted: the bytes asked for, or what the allocations took as the driver
// reports it (the drop in free device memory across each cudaMalloc). The allocator hands out
// whole pages, so a small buffer can take nothing (it fits a page already taken) and the one
// that opens a page takes all of it; summed over many buffers the two agree to a few MiB.
enum class MemoryCount { allocated, measured };

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // Allocates `bytes` (none for 0). Out of memory throws, naming the bytes asked for and `what`.
  explicit DeviceBuffer(size_t bytes, const std::string& what = "");
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }
  size_t count(MemoryCount how) const { return how == MemoryCount::allocated ? bytes_ : measured_; }

  // Copies `bytes` from host memory to the start of the buffer, or back.
  void upload(const void* src, size_t bytes);
  void download(void* dst, size_t bytes) const;
  // Sets every byte to `value`.
  void fill(uint8_t value);
  // 0xFF in every byte: each FP16 and FP32 element becomes a NaN, so an element the kernel never
  // wrote is caught by any NaN check.
  void poison() { fill(0xFF); }

 private:
  void release() noexcept;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  size_t measured_ = 0;  // the drop in free device memory across the allocation
};

template <class T>
DeviceBuffer to_device(const std::vector<T>& host, const std::string& what = "") {
  DeviceBuffer buffer(host.size() * sizeof(T), what);
  buffer.upload(host.data(), host.size() * sizeof(T));
  return buffer;
}

template <class T>
std::vector<T> to_host(const DeviceBuffer& buffer, size_t count) {
  std::vector<T> host(count);
  buffer.download(host.data(), count * sizeof(T));
  return host;
}

// Waits for all work on the current device; a failed kernel surfaces here, named by `context`.
void device_synchronize(const std::string& context);

}  // namespace tilemix::gpu
