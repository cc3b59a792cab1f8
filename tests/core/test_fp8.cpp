#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "core/fp8.hpp"

using namespace tilemix;

TEST_CASE("fp8 e4m3 codes decode to the format's values", "[fp8]") {
  CHECK(fp8_e4m3_to_float(0x00) == 0.0f);
  CHECK(std::signbit(fp8_e4m3_to_float(0x80)));
  CHECK(fp8_e4m3_to_float(0x01) == std::ldexp(1.0f, -9));  // smallest subnormal
  CHECK(fp8_e4m3_to_float(0x07) == 7 * std::ldexp(1.0f, -9));
  CHECK(fp8_e4m3_to_float(0x08) == std::ldexp(1.0f, -6));  // smallest normal
  CHECK(fp8_e4m3_to_float(0x38) == 1.0f);
  CHECK(fp8_e4m3_to_float(0x3c) == 1.5f);
  CHECK(fp8_e4m3_to_float(0x7e) == 448.0f);
  CHECK(fp8_e4m3_to_float(0xfe) == -448.0f);
  CHECK(std::isnan(fp8_e4m3_to_float(0x7f)));
  CHECK(std::isnan(fp8_e4m3_to_float(0xff)));
  // Every finite code is strictly larger than the one below it (the grid is monotonic).
  for (int c = 1; c <= 0x7e; ++c) CHECK(fp8_e4m3_to_float(static_cast<uint8_t>(c)) > fp8_e4m3_to_float(c - 1));
}

TEST_CASE("fp8 e4m3 encoding rounds to nearest even and saturates", "[fp8]") {
  // Every finite code is its own value's encoding, both signs.
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    INFO("code " << c);
    CHECK(float_to_fp8_e4m3(fp8_e4m3_to_float(static_cast<uint8_t>(c))) == c);
  }
  // Between neighbours: a quarter of the way rounds down, three quarters up, the midpoint to the
  // even code (the mantissa's last bit), across the subnormal-normal boundary too.
  for (int c = 0; c < 0x7e; ++c) {
    const float lo = fp8_e4m3_to_float(static_cast<uint8_t>(c)), hi = fp8_e4m3_to_float(static_cast<uint8_t>(c + 1));
    INFO("between codes " << c << " and " << c + 1);
    CHECK(float_to_fp8_e4m3(lo + (hi - lo) / 4) == c);
    CHECK(float_to_fp8_e4m3(lo + 3 * (hi - lo) / 4) == c + 1);
    CHECK(float_to_fp8_e4m3((lo + hi) / 2) == (c % 2 == 0 ? c : c + 1));
    CHECK(float_to_fp8_e4m3(-(lo + hi) / 2) == (0x80 | (c % 2 == 0 ? c : c + 1)));
  }
  // Below half the smallest subnormal: zero, keeping the sign.
  CHECK(float_to_fp8_e4m3(std::ldexp(1.0f, -11)) == 0x00);
  CHECK(float_to_fp8_e4m3(-std::ldexp(1.0f, -11)) == 0x80);
  CHECK(float_to_fp8_e4m3(std::numeric_limits<float>::denorm_min()) == 0x00);
  // satfinite: past 448, and infinity, give +-448; NaN gives the NaN code.
  CHECK(float_to_fp8_e4m3(449.0f) == 0x7e);
  CHECK(float_to_fp8_e4m3(480.0f) == 0x7e);
  CHECK(float_to_fp8_e4m3(1e30f) == 0x7e);
  CHECK(float_to_fp8_e4m3(std::numeric_limits<float>::infinity()) == 0x7e);
  CHECK(float_to_fp8_e4m3(-std::numeric_limits<float>::infinity()) == 0xfe);
  CHECK(float_to_fp8_e4m3(std::nanf("")) == kFp8E4m3Nan);
}
