#include "core/host_memory.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <new>
#include <optional>
#include <sstream>

#include "core/sizes.hpp"

namespace tilemix {
namespace {

// The first number of a file such as /sys/fs/cgroup/memory.max; nullopt for "max" or no file.
std::optional<int64_t> read_number(const char* path) {
  std::ifstream in(path);
  int64_t v = 0;
  if (in >> v) return v;
  return std::nullopt;
}

std::optional<int64_t> meminfo_available() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  return std::nullopt;
}

// Room under the cgroup (v2, else v1) memory limit, where one is set.
std::optional<int64_t> cgroup_room() {
  const std::pair<const char*, const char*> files[] = {
      {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
      {"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"}};
  for (const auto& [limit_file, usage_file] : files) {
    const auto limit = read_number(limit_file), usage = read_number(usage_file);
    if (limit && usage) return std::max<int64_t>(0, *limit - *usage);
  }
  return std::nullopt;
}

}  // namespace

HostOutOfMemory::HostOutOfMemory(const std::string& what, int64_t bytes_asked, int64_t bytes_available)
    : std::runtime_error("out of host memory: " + what + " needs about " + bytes_text(bytes_asked) + " (" +
                         std::to_string(bytes_asked) + " bytes); " + bytes_text(bytes_available) + " available"),
      bytes_asked_(bytes_asked) {}

int64_t available_host_memory() {
  int64_t available = meminfo_available().value_or(static_cast<int64_t>(sysconf(_SC_AVPHYS_PAGES)) *
                                                   static_cast<int64_t>(sysconf(_SC_PAGESIZE)));
  if (const auto room = cgroup_room()) available = std::min(available, *room);
  return available;
}

void run_within_host_memory(const std::string& what, int64_t bytes, int64_t available,
                            const std::function<void()>& body) {
  if (bytes > available) throw HostOutOfMemory(what, bytes, available);
  try {
    body();
  } catch (const std::bad_alloc&) {
    throw HostOutOfMemory(what, bytes, available_host_memory());
  }
}

void run_within_host_memory(const std::string& what, int64_t bytes, const std::function<void()>& body) {
  run_within_host_memory(what, bytes, available_host_memory(), body);
}

}  // namespace tilemix
