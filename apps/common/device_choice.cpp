#include "apps/common/device_choice.hpp"

#include "core/error.hpp"
#include "tilemix/baselines.hpp"
#include "tilemix/gpu.hpp"

namespace tilemix::app {

DeviceChoice choose_device(const std::string& requested) {
  DeviceChoice c;
  if (requested == "cpu") return c;
  if (requested != "auto" && requested != "gpu") {
    throw InputError("--device", "expected auto, cpu or gpu, got '" + requested + "'");
  }
  std::string why;
  const int n = gpu::device_count(&why);
  if (n > 0) {
    c.gpu = true;
    return c;
  }
  if (requested == "gpu") throw InputError("--device gpu", why);
  c.note = "no GPU (" + why + "): running the CPU emulator and reference only";
  return c;
}

nlohmann::json device_provenance(const DeviceChoice& device) {
  if (!device.gpu) return {{"kind", "cpu"}};
  const gpu::DeviceInfo d = gpu::device_info(device.index);
  return {{"kind", "gpu"},
          {"index", d.index},
          {"name", d.name},
          {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
          {"sm_count", d.sm_count},
          {"sm_clock_mhz", d.sm_clock_mhz},
          {"memory_clock_mhz", d.mem_clock_mhz},
          {"global_memory_bytes", d.global_mem_bytes},
          {"l2_bytes", d.l2_bytes},
          {"driver", d.driver},
          {"driver_cuda_version", d.driver_version},
          {"cuda_runtime_version", d.runtime_version},
          {"cudnn_version", gpu::cudnn_version_string()},
          {"cublas_version", gpu::cublas_version_string()}};
}

}  // namespace tilemix::app
