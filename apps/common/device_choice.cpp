#include "apps/common/device_choice.hpp"

#include "core/error.hpp"
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

}  // namespace tilemix::app
