#include "apps/common/app_main.hpp"

#include <fmt/core.h>

#include <cstdio>
#include <exception>
#include <new>

#include "core/error.hpp"

namespace tilemix::app {

int guarded_main(const char* tool, const std::function<int()>& body) {
  try {
    return body();
  } catch (const InputError& e) {
    fmt::print(stderr, "{}: error: {}\n", tool, e.what());
    return kExitBadInput;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "{}: error: out of host memory\n", tool);
    return kExitRuntime;
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: error: {}\n", tool, e.what());
    return kExitRuntime;
  }
}

}  // namespace tilemix::app
