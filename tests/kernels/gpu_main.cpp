// Runs the GPU tests, or reports why they cannot run: exit code 77 is ctest's "skipped".
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "tilemix/gpu.hpp"

int main(int argc, char* argv[]) {
  std::string why;
  if (tilemix::gpu::device_count(&why) == 0) {
    std::printf("SKIPPED: %s\n", why.c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
