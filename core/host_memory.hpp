#pragma once
// Host memory a run asks for (SPEC 9: out-of-memory is reported with the bytes asked for). The apps
// estimate what a case needs before building it and refuse a case that does not fit the memory
// available now, so that neither std::bad_alloc nor the kernel's OOM killer ends the process; an
// allocation that fails anyway inside the estimate's scope is reported the same way.
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

namespace tilemix {

class HostOutOfMemory : public std::runtime_error {
 public:
  // "out of host memory: <what> needs about 2.0 GiB (2147483648 bytes); 1.0 GiB available"
  HostOutOfMemory(const std::string& what, int64_t bytes_asked, int64_t bytes_available);
  int64_t bytes_asked() const { return bytes_asked_; }

 private:
  int64_t bytes_asked_;
};

// Bytes this process can still allocate without paging: the kernel's MemAvailable, capped by the
// room left under a cgroup memory limit where one is set.
int64_t available_host_memory();

// Runs `body` when `bytes` (the estimate for `what`) fit in `available` bytes; throws
// HostOutOfMemory otherwise, and when `body` throws std::bad_alloc.
void run_within_host_memory(const std::string& what, int64_t bytes, int64_t available,
                            const std::function<void()>& body);
// The same against available_host_memory().
void run_within_host_memory(const std::string& what, int64_t bytes, const std::function<void()>& body);

}  // namespace tilemix
