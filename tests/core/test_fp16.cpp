#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "core/fp16.hpp"

using namespace tilemix;

TEST_CASE("fp16 conversions round to nearest even", "[fp16]") {
  CHECK(float_to_half(1.0f) == 0x3c00);
  CHECK(float_to_half(-2.0f) == 0xc000);
  CHECK(float_to_half(65504.0f) == 0x7bff);
  CHECK(float_to_half(65520.0f) == 0x7c00);  // halfway to the next binade: ties to even -> inf
  CHECK(float_to_half(65519.0f) == 0x7bff);
  CHECK(float_to_half(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK((float_to_half(std::nanf("")) & 0x7fff) > 0x7c00);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even keeps 1.
  CHECK(float_to_half(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
  CHECK(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
  // subnormals
  CHECK(float_to_half(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(float_to_half(std::ldexp(1.0f, -25)) == 0x0000);          // tie to even -> 0
  CHECK(float_to_half(std::ldexp(1.5f, -25)) == 0x0001);
  CHECK(float_to_half(std::ldexp(3.0f, -25)) == 0x0002);          // 1.5 ulp -> tie to even 2
  CHECK(float_to_half(std::ldexp(1023.0f, -24)) == 0x03ff);
  CHECK(float_to_half(std::ldexp(1.0f, -14)) == 0x0400);
}

TEST_CASE("fp16 round trip is exact for every half value", "[fp16]") {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float f = half_to_float(bits);
    if (std::isnan(f)) continue;
    REQUIRE(float_to_half(f) == bits);
  }
  CHECK(half_to_float(0x0001) == std::ldexp(1.0f, -24));
  CHECK(half_to_float(0x3555) == Approx(0.333251953125f));
}
