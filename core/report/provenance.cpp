#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/report/table.hpp"
#include "tilemix_git_sha.h"  // generated at every build (cmake/git_sha.cmake)

namespace tilemix {

std::string tool_version() { return TILEMIX_VERSION; }
std::string git_sha() { return TILEMIX_GIT_SHA; }

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "unknown";
  return name;
}

std::string utc_time() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

nlohmann::json provenance_json(const Provenance& p) {
  return {{"tool", p.tool},      {"version", tool_version()},    {"git_sha", git_sha()},
          {"argv", p.argv},      {"config_path", p.config_path}, {"config", p.config},
          {"host", host_name()}, {"time_utc", utc_time()},       {"device", p.device}};
}

void write_text_file(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec) throw InputError(path, "cannot create directory " + target.parent_path().string() + ": " + ec.message());
  }
  // A reader (or an interrupted run) sees the old file or the new one, never half of it.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(path, std::string("cannot write file: ") + std::strerror(errno));
    out << text;
    out.close();
    if (!out) throw InputError(path, std::string("cannot write file: ") + std::strerror(errno));
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove(tmp, ec);
    throw InputError(path, "cannot replace file: " + why);
  }
}

}  // namespace tilemix
