#pragma once
// GPU timing for the bench (SPEC 8): CUDA events around each repetition, warm-up first,
// repetitions until the median is stable to a noise target or a time limit, an L2 flush or input
// rotation between repetitions, and the SM clock read before and after so throttling is visible.
#include <functional>
#include <string>
#include <vector>

namespace tilemix::gpu {

struct TimingOptions {
  int warmup = 3;
  // ... and at least this long (each warm-up launch waited for): a first row timed after a few
  // warm-up launches of a 0.1 ms kernel came out 14% slow in a quarter of the processes on an H200
  // (results/h200/experiments/warmup-first-row.json); 20 launches or a warm-up row before it fixed it.
  double warmup_seconds = 0.02;
  int min_reps = 10;
  int max_reps = 200;
  double max_seconds = 2.0;  // wall-clock budget of the repetitions of one row
  double noise = 0.01;       // stop when the standard error of the mean over the median is below this
  bool flush_l2 = false;     // read a buffer larger than L2 before each repetition
};

struct TimingResult {
  std::vector<double> ms;  // every timed repetition
  double median_ms = 0, min_ms = 0, max_ms = 0, rel_std = 0;
  int sm_clock_start_mhz = 0, sm_clock_end_mhz = 0, sm_clock_max_mhz = 0;  // 0 when unreadable
  bool throttled = false;  // end clock under 90% of the maximum
  std::string clock_note;  // why clocks are unreadable, or the throttle reason
};

// Times `launch(rep)` (which enqueues its work on the default stream; `rep` lets the caller rotate
// input buffers) on the current device. Errors from the launches surface as exceptions.
TimingResult time_launches(const std::function<void(int rep)>& launch, const TimingOptions& options);

// Device-to-device copy bandwidth of the current device in GB/s (bytes read + written per second),
// measured with `bytes` per copy: the memory ceiling reported beside results.
double measure_copy_bandwidth_gbps(size_t bytes);

}  // namespace tilemix::gpu
