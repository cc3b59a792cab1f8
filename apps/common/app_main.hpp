#pragma once
// Shared entry-point handling for the apps: exit codes and error reporting.
//   0  success / every case passed
//   1  a case failed its tolerance
//   2  bad input (config, file, option, shape): the message names the field or file
//   3  a runtime failure (CUDA error, out of memory, I/O)
#include <functional>

namespace tilemix::app {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitRuntime = 3;

// Runs `body`, mapping InputError to 2 and any other exception to 3 with a one-line message on
// stderr prefixed by `tool`.
int guarded_main(const char* tool, const std::function<int()>& body);

}  // namespace tilemix::app
