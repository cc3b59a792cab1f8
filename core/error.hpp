#pragma once
// Errors raised for bad user input. The apps map InputError to exit code 2; every message
// names the field or file at fault and what was expected (SPEC 9).
#include <stdexcept>
#include <string>

namespace tilemix {

class InputError : public std::runtime_error {
 public:
  InputError(std::string where, const std::string& what)
      : std::runtime_error(where.empty() ? what : where + ": " + what), where_(std::move(where)) {}
  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

}  // namespace tilemix
