#include "core/input_file.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"

namespace tilemix {

int64_t regular_file_size(const std::string& path, const std::string& expected) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw InputError(path, std::string("cannot open file: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw InputError(path, "is a directory, expected " + expected);
  if (!S_ISREG(st.st_mode)) {
    throw InputError(path, "is not a regular file (a device, FIFO or socket), expected " + expected);
  }
  return static_cast<int64_t>(st.st_size);
}

}  // namespace tilemix
