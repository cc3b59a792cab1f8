#include <catch2/catch.hpp>

#include <new>
#include <string>

#include "core/host_memory.hpp"

using namespace tilemix;
using Catch::Matchers::Contains;

TEST_CASE("a body runs when its bytes fit the memory available", "[memory]") {
  bool ran = false;
  run_within_host_memory("case 'a'", 1000, 1000, [&] { ran = true; });
  CHECK(ran);
}

TEST_CASE("bytes past the memory available are refused before the body runs", "[memory]") {
  bool ran = false;
  try {
    run_within_host_memory("case 'big' (cfg.json: $.cases[0])", int64_t{3} << 30, int64_t{1} << 30,
                           [&] { ran = true; });
    FAIL("no error");
  } catch (const HostOutOfMemory& e) {
    CHECK(e.bytes_asked() == int64_t{3} << 30);
    CHECK(std::string(e.what()) ==
          "out of host memory: case 'big' (cfg.json: $.cases[0]) needs about 3.0 GiB (3221225472 bytes); 1.0 GiB "
          "available");
  }
  CHECK_FALSE(ran);
}

TEST_CASE("an allocation that fails inside the body is reported with the bytes asked for", "[memory]") {
  try {
    run_within_host_memory("case 'a'", 4096, int64_t{1} << 40, [] { throw std::bad_alloc(); });
    FAIL("no error");
  } catch (const HostOutOfMemory& e) {
    CHECK(e.bytes_asked() == 4096);
    CHECK_THAT(e.what(), Contains("out of host memory: case 'a' needs about 4.0 KiB (4096 bytes)"));
  }
}

TEST_CASE("the memory available is a positive byte count", "[memory]") {
  const int64_t available = available_host_memory();
  CHECK(available > 0);
  // Below 2^50 bytes (1 PiB) on any machine these tests run on: the value is in bytes, not pages or KiB.
  CHECK(available < int64_t{1} << 50);
}
