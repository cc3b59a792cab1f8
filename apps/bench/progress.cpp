#include "apps/bench/progress.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace tilemix::app {

Progress::Progress(int total) : total_(std::max(total, 1)), terminal_(isatty(fileno(stderr)) != 0) {}

void Progress::step(int done, const std::string& label) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (!terminal_) {
    fmt::print(stderr, "[{}/{}] {}\n", done, total_, label);
    return;
  }
  constexpr int kWidth = 30;
  const int filled = std::min(kWidth, done * kWidth / total_);
  fmt::print(stderr, "\r\033[K[{}{}] {}/{} {}", std::string(filled, '#'), std::string(kWidth - filled, '.'), done,
             total_, label.substr(0, 60));
  std::fflush(stderr);
}

void Progress::finish() {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (terminal_) fmt::print(stderr, "\n");
}

}  // namespace tilemix::app
