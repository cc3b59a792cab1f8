#pragma once
// A GPU's compute capability as the kernels' choices read it (plain C++, so that the choice for
// a GPU this machine lacks is unit-tested with a made-up one).
namespace tilemix {

struct ComputeCapability {
  // sm_90 unless a device says otherwise: CPU runs emulate the kernels an H100 or H200 runs.
  int major = 9, minor = 0;

  int sm() const { return 10 * major + minor; }
  // The TMA, wgmma and setmaxnreg kernels (prefill v2 and v3, the wgmma decode mainloop, FP8 P V)
  // are built for sm_90a, which runs on sm_90 alone.
  bool runs_sm90a() const { return major == 9 && minor == 0; }
  // FP8 tensor cores (E4M3 MMA): sm_89 and later.
  bool has_fp8_mma() const { return sm() >= 89; }
};

}  // namespace tilemix
