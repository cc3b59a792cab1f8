#pragma once
// The message of the InputError that f throws, or "" when it throws none: for tests of the
// errors a user's input gets.
#include <functional>
#include <string>

#include "core/error.hpp"

namespace tilemix::testing {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace tilemix::testing
