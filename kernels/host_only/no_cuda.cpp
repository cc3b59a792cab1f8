// Built when the CUDA kernels are not: every GPU entry point reports that the build has no CUDA.
#include <stdexcept>
#include <utility>

#include "../prefill/tile_sizes.hpp"
#include "tilemix/attention.hpp"
#include "tilemix/device_buffer.hpp"
#include "tilemix/fp8_mma.hpp"
#include "tilemix/gpu.hpp"
#include "tilemix/onchip_codes.hpp"
#include "tilemix/routing.hpp"

namespace tilemix::gpu {

bool built_with_cuda() { return false; }

int device_count(std::string* why) {
  if (why) *why = "this build has no CUDA kernels (configured with TILEMIX_CUDA=OFF or without nvcc)";
  return 0;
}

DeviceInfo device_info(int) { throw std::runtime_error("this build has no CUDA kernels"); }

void select_device(int) { throw std::runtime_error("this build has no CUDA kernels"); }
ComputeCapability current_compute_capability() { throw std::runtime_error("this build has no CUDA kernels"); }
std::string current_device_name() { throw std::runtime_error("this build has no CUDA kernels"); }

// The geometry is known without a GPU: the emulator and the plans of a CPU-only run use it.
TileGeometry tilemix_geometry(int d) { return prefill_geometry(d, "tilemix_geometry"); }
TileGeometry flash_geometry(int d) { return prefill_geometry(d, "flash_geometry"); }
PrefillEmulation prefill_emulation(PrefillMainloop mainloop) { return emulation_of(mainloop); }

void quantize_queries(const PrefillParams&, void*) { throw std::runtime_error("this build has no CUDA kernels"); }
void quantize_keys(const PrefillParams&, void*) { throw std::runtime_error("this build has no CUDA kernels"); }
void smooth_keys(const PrefillParams&, void*) { throw std::runtime_error("this build has no CUDA kernels"); }
void quantize_values_fp8(const PrefillParams&, void*) {
  throw std::runtime_error("this build has no CUDA kernels");
}
void tilemix_prefill(const PrefillParams&, void*) { throw std::runtime_error("this build has no CUDA kernels"); }
void flash_fp16_prefill(const PrefillParams&, void*) { throw std::runtime_error("this build has no CUDA kernels"); }
void adaptive_words(const AdaptiveRoutingParams&, void*) { throw std::runtime_error("this build has no CUDA kernels"); }
ResidentCodes code_resident_rows(const std::vector<uint16_t>&, int, int, int) {
  throw std::runtime_error("this build has no CUDA kernels");
}
std::vector<float> fp8_mma_m64n64k32(const std::vector<uint8_t>&, const std::vector<uint8_t>&,
                                     const std::vector<float>&, bool) {
  throw std::runtime_error("this build has no CUDA kernels");
}

DeviceBuffer::DeviceBuffer(size_t bytes, const std::string&) {
  if (bytes != 0) throw std::runtime_error("this build has no CUDA kernels");
}
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  ptr_ = std::exchange(other.ptr_, nullptr);
  bytes_ = std::exchange(other.bytes_, 0);
  return *this;
}
void DeviceBuffer::release() noexcept {}
void DeviceBuffer::upload(const void*, size_t bytes) {
  if (bytes != 0) throw std::runtime_error("this build has no CUDA kernels");
}
void DeviceBuffer::download(void*, size_t bytes) const {
  if (bytes != 0) throw std::runtime_error("this build has no CUDA kernels");
}
void DeviceBuffer::fill(uint8_t) {}
void device_synchronize(const std::string&) { throw std::runtime_error("this build has no CUDA kernels"); }

}  // namespace tilemix::gpu
