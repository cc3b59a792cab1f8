#include "apps/bench/sweep.hpp"

#include <fmt/format.h>

#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "tilemix/baselines.hpp"

namespace tilemix::app {

void shard_over_devices(
    const std::vector<CaseGroup>& groups, const std::vector<int>& devices, ResultTable& table,
    const std::function<void()>& on_row,
    const std::function<void(const std::vector<const CaseGroup*>& share, int device, const RowSink& emit)>& run) {
  std::mutex table_mutex;
  const RowSink emit = [&](std::vector<Cell> row) {
    const std::lock_guard<std::mutex> lock(table_mutex);
    table.add_row(std::move(row));
    on_row();
  };
  std::vector<std::thread> workers;
  std::vector<std::exception_ptr> errors(devices.size());
  for (size_t i = 0; i < devices.size(); ++i) {
    std::vector<const CaseGroup*> share;
    for (size_t g = i; g < groups.size(); g += devices.size()) share.push_back(&groups[g]);
    workers.emplace_back([&, i, share] {
      try {
        run(share, devices[i], emit);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  }
  for (auto& w : workers) w.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

gpu::TimingOptions timing_options(const TimingSpec& t) {
  gpu::TimingOptions o;
  o.warmup = t.warmup;
  o.warmup_seconds = t.warmup_seconds;
  o.min_reps = t.min_reps;
  o.max_reps = t.max_reps;
  o.max_seconds = t.max_seconds;
  o.noise = t.noise;
  o.flush_l2 = t.flush_l2;
  return o;
}

std::string run_status(const std::function<void()>& run) {
  try {
    run();
  } catch (const gpu::OutOfMemory& e) {
    return fmt::format("OOM ({:.1f} GiB asked)", e.bytes_asked / double(1ull << 30));
  } catch (const std::invalid_argument& e) {
    return std::string("unavailable (") + e.what() + ")";
  }
  return "ok";
}

}  // namespace tilemix::app
