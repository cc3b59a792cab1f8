#pragma once
// What every fuzz target asserts: a reader either returns a valid object or throws the project's
// InputError naming a field or file. Any other exception, or an InputError that names nothing, is
// a contract violation and aborts, which libFuzzer reports as a crash with the input saved.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <unistd.h>

#include "core/error.hpp"

namespace tilemix::fuzz {

[[noreturn]] inline void violation(const char* what, const std::string& detail) {
  std::fprintf(stderr, "contract violation: %s: %s\n", what, detail.c_str());
  std::abort();
}

// Runs `read`; returns whether it produced an object (false for a proper InputError).
template <class Read>
bool accepted(Read&& read) {
  try {
    read();
    return true;
  } catch (const InputError& e) {
    if (e.where().empty()) violation("InputError without a field or file", e.what());
    return false;
  } catch (const std::exception& e) {
    violation("exception other than InputError", e.what());
  } catch (...) {
    violation("non-standard exception", "");
  }
}

// The input as a file of this process (the readers take paths), rewritten for every input.
inline std::string write_input(const uint8_t* data, size_t size, const char* suffix) {
  static const std::string stem = "/tmp/tilemix-fuzz-" + std::to_string(getpid());
  const std::string path = stem + suffix;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), size);
  return path;
}

}  // namespace tilemix::fuzz
