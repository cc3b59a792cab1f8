// RAII device memory and synchronous copies for the plain C++ API.
#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "kernels/common/check.cuh"
#include "tilemix/device_buffer.hpp"

namespace tilemix::gpu {
namespace {

std::string sized(const char* what, size_t bytes, const std::string& name) {
  return std::string(what) + " of " + std::to_string(bytes) + " bytes" + (name.empty() ? "" : " for " + name);
}

void check_size(size_t bytes, size_t capacity, const char* op) {
  if (bytes > capacity) {
    throw std::out_of_range(std::string("DeviceBuffer::") + op + ": " + std::to_string(bytes) +
                            " bytes do not fit a buffer of " + std::to_string(capacity));
  }
}

}  // namespace

DeviceBuffer::DeviceBuffer(size_t bytes, const std::string& what) : bytes_(bytes) {
  if (bytes == 0) return;
  size_t free_before = 0, free_after = 0, total = 0;
  TILEMIX_CUDA_CHECK(cudaMemGetInfo(&free_before, &total), sized("cudaMemGetInfo before the allocation", bytes, what));
  TILEMIX_CUDA_CHECK(cudaMalloc(&ptr_, bytes), sized("allocation", bytes, what));
  TILEMIX_CUDA_CHECK(cudaMemGetInfo(&free_after, &total), sized("cudaMemGetInfo after the allocation", bytes, what));
  measured_ = free_before > free_after ? free_before - free_after : 0;
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      measured_(std::exchange(other.measured_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    measured_ = std::exchange(other.measured_, 0);
  }
  return *this;
}

void DeviceBuffer::release() noexcept {
  if (ptr_ != nullptr) cudaFree(ptr_);  // a failure here has no one left to report to
  ptr_ = nullptr;
  bytes_ = 0;
  measured_ = 0;
}

void DeviceBuffer::upload(const void* src, size_t bytes) {
  check_size(bytes, bytes_, "upload");
  if (bytes == 0) return;
  TILEMIX_CUDA_CHECK(cudaMemcpy(ptr_, src, bytes, cudaMemcpyHostToDevice), sized("upload", bytes, ""));
}

void DeviceBuffer::download(void* dst, size_t bytes) const {
  check_size(bytes, bytes_, "download");
  if (bytes == 0) return;
  TILEMIX_CUDA_CHECK(cudaMemcpy(dst, ptr_, bytes, cudaMemcpyDeviceToHost), sized("download", bytes, ""));
}

void DeviceBuffer::fill(uint8_t value) {
  if (bytes_ == 0) return;
  TILEMIX_CUDA_CHECK(cudaMemset(ptr_, value, bytes_), sized("memset", bytes_, ""));
}

void device_synchronize(const std::string& context) {
  TILEMIX_CUDA_CHECK(cudaDeviceSynchronize(), context);
}

}  // namespace tilemix::gpu
