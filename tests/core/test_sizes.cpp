#include <catch2/catch.hpp>

#include <limits>
#include <stdexcept>

#include "core/error.hpp"
#include "core/sizes.hpp"
#include "tests/core/input_errors.hpp"

using namespace tilemix;
using tilemix::testing::error_of;
using Catch::Matchers::Contains;

TEST_CASE("checked_product multiplies sizes and names each factor when they overflow", "[sizes]") {
  CHECK(checked_product("w", "Q", {{3, "a"}, {5, "b"}, {7}}) == 105);
  CHECK(checked_product("w", "Q", {}) == 1);
  // 2^31 * 2^31 = 2^62 fits; one more factor of 2 is 2^63, one past the largest int64_t.
  CHECK(checked_product("w", "Q", {int64_t{1} << 31, int64_t{1} << 31}) == int64_t{1} << 62);
  CHECK(checked_product("w", "Q", {{std::numeric_limits<int64_t>::max(), "n"}, {1, "one"}}) ==
        std::numeric_limits<int64_t>::max());
  const std::string msg = error_of([] {
    checked_product("cfg.json: $.cases[0]", "Q [total_q, hq, d] in doubles",
                    {{int64_t{1} << 51, "total_q"}, {65536, "hq"}, {128, "d"}, {8, "bytes"}});
  });
  CHECK(msg == "cfg.json: $.cases[0]: Q [total_q, hq, d] in doubles is 2251799813685248 (total_q) x 65536 (hq) x "
               "128 (d) x 8 (bytes), more than 9223372036854775807");
  CHECK_THROWS_AS(checked_product("w", "Q", {int64_t{1} << 31, int64_t{1} << 31, 2}), InputError);
}

TEST_CASE("checked_product: a zero factor gives 0 however large the others are", "[sizes]") {
  const int64_t big = std::numeric_limits<int64_t>::max();
  CHECK(checked_product("w", "Q", {big, big, 0}) == 0);
  CHECK(checked_product("w", "Q", {0, big, big}) == 0);
}

TEST_CASE("checked_product and checked_sum against a smaller limit", "[sizes]") {
  CHECK(checked_product("w", "cases", {{10, "cases"}, {10000, "$.axes.seed"}}, 100000) == 100000);
  CHECK(error_of([] { checked_product("cfg.json: $.axes", "the number of cases",
                                      {{2, "cases"}, {1000, "$.axes.seed"}, {1000, "$.axes.ratio"}}, 100000); }) ==
        "cfg.json: $.axes: the number of cases is 2 (cases) x 1000 ($.axes.seed) x 1000 ($.axes.ratio) = 2000000, at "
        "most 100000");
  CHECK(checked_sum("w", "n", {1, 2, 3}) == 6);
  CHECK(checked_sum("w", "n", {4, 6}, 10) == 10);
  CHECK(error_of([] { checked_sum("w", "n", {4, 7}, 10); }) == "w: n is 4 + 7 = 11, at most 10");
  CHECK(error_of([] { checked_sum("w", "n", {std::numeric_limits<int64_t>::max(), 1}); }) ==
        "w: n is 9223372036854775807 + 1, more than 9223372036854775807");
}

TEST_CASE("negative sizes are a caller's bug, not an input error", "[sizes]") {
  CHECK_THROWS_AS(checked_product("w", "Q", {3, -1}), std::invalid_argument);
  CHECK_THROWS_AS(checked_sum("w", "n", {3, -1}), std::invalid_argument);
}

TEST_CASE("bytes_text picks a binary unit", "[sizes]") {
  CHECK(bytes_text(0) == "0 bytes");
  CHECK(bytes_text(1023) == "1023 bytes");
  CHECK(bytes_text(1024) == "1.0 KiB");
  CHECK(bytes_text(int64_t{3} << 29) == "1.5 GiB");
  CHECK(bytes_text(int64_t{1} << 55) == "32.0 PiB");
  CHECK(bytes_text(std::numeric_limits<int64_t>::max()) == "8.0 EiB");
}
