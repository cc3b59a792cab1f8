// Whether a resolved prefill mainloop runs on a GPU (plain C++: the apps check a config's cases
// against the device before they run any, and the dispatcher checks every call).
#include <stdexcept>
#include <string>

#include "tilemix/attention.hpp"

namespace tilemix::gpu {

void require_prefill_mainloop_runs(PrefillMainloop mainloop, ComputeCapability cc, const std::string& gpu) {
  if (prefill_mainloop_runs_on(mainloop, cc)) return;
  throw std::invalid_argument("mainloop " + std::string(to_string(mainloop)) + " is built for sm_90a alone; " + gpu +
                              " is sm_" + std::to_string(cc.sm()) + ": use mainloop mma_sync (or auto)");
}

}  // namespace tilemix::gpu
