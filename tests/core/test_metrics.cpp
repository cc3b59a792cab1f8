#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "core/metrics.hpp"

using namespace tilemix;
using Catch::Matchers::Contains;

TEST_CASE("deviation metrics on hand-made vectors", "[metrics]") {
  const Deviation d = deviation({1, 2, 3}, {1, 2, 5});
  CHECK(d.count == 3);
  CHECK(d.nonfinite == 0);
  CHECK(d.max_abs == 2.0);
  CHECK(d.mean_abs == Approx(2.0 / 3.0));
  CHECK(d.rel_l2 == Approx(2.0 / std::sqrt(30.0)));
  CHECK(d.cosine == Approx(20.0 / (std::sqrt(14.0) * std::sqrt(30.0))));

  const Deviation same = deviation({-1, 0.5}, {-1, 0.5});
  CHECK(same.max_abs == 0.0);
  CHECK(same.rel_l2 == 0.0);
  CHECK(same.cosine == Approx(1.0));

  const Deviation opposite = deviation({1, -2}, {-1, 2});
  CHECK(opposite.cosine == Approx(-1.0));
  CHECK(opposite.rel_l2 == Approx(2.0));
}

TEST_CASE("deviation of zero vectors", "[metrics]") {
  const Deviation zeros = deviation({0, 0}, {0, 0});
  CHECK(zeros.rel_l2 == 0.0);
  CHECK(zeros.cosine == 1.0);
  const Deviation vs_zero = deviation({1, 0}, {0, 0});
  CHECK(std::isinf(vs_zero.rel_l2));
  CHECK(vs_zero.cosine == 0.0);
  const Deviation empty = deviation({}, {});
  CHECK(empty.count == 0);
  CHECK(empty.cosine == 1.0);
  CHECK_THROWS_AS(deviation({1}, {1, 2}), std::invalid_argument);
}

TEST_CASE("NaN and Inf are counted, left out of the sums, and never pass", "[metrics]") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const Deviation d = deviation({nan, 1, 2, inf}, {5, 1, 3, 0});
  CHECK(d.count == 4);
  CHECK(d.nonfinite == 2);
  CHECK(d.ref_nonfinite == 0);
  CHECK(d.max_abs == 1.0);
  CHECK(d.mean_abs == 0.5);
  CHECK(d.rel_l2 == Approx(1.0 / std::sqrt(10.0)));

  std::string why;
  CHECK_FALSE(within(d, Tolerance{}, &why));
  CHECK_THAT(why, Contains("2 NaN/Inf values in the output"));

  const Deviation r = deviation({1, 2}, {nan, 2});
  CHECK(r.nonfinite == 0);
  CHECK(r.ref_nonfinite == 1);
  CHECK_FALSE(within(r, Tolerance{}, &why));
  CHECK_THAT(why, Contains("1 NaN/Inf values in the baseline"));
}

TEST_CASE("within checks each bound and says which failed", "[metrics]") {
  Deviation d;
  d.max_abs = 0.02;
  d.mean_abs = 0.001;
  d.rel_l2 = 0.01;
  d.cosine = 0.9999;
  d.count = 10;
  Tolerance t;
  std::string why = "stale";
  CHECK(within(d, t, &why));
  CHECK(why.empty());

  t.max_abs = 0.05;
  t.mean_abs = 0.002;
  t.rel_l2 = 0.02;
  t.min_cosine = 0.999;
  CHECK(within(d, t));

  t.max_abs = 0.01;
  CHECK_FALSE(within(d, t, &why));
  CHECK(why == "max_abs 0.02 > 0.01");

  t.max_abs = 0.05;
  t.mean_abs = 0.0005;
  t.min_cosine = 0.99999;
  CHECK_FALSE(within(d, t, &why));
  CHECK(why == "mean_abs 0.001 > 0.0005; cosine 0.9999 < min_cosine 0.99999");

  t = Tolerance{};
  t.rel_l2 = 0.001;
  CHECK_FALSE(within(d, t, &why));
  CHECK(why == "rel_l2 0.01 > 0.001");

  d.max_abs = std::nan("");
  t = Tolerance{};
  t.max_abs = 1.0;
  CHECK_FALSE(within(d, t, &why));
  CHECK_THAT(why, Contains("max_abs nan > 1"));
}

TEST_CASE("metrics over many elements do not depend on chunking", "[metrics]") {
  std::vector<double> out(300001), ref(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    ref[i] = std::sin(0.001 * static_cast<double>(i));
    out[i] = ref[i] + 1e-3 * std::cos(0.37 * static_cast<double>(i));
  }
  const Deviation a = deviation(out, ref), b = deviation(out, ref);
  CHECK(a.mean_abs == b.mean_abs);
  CHECK(a.rel_l2 == b.rel_l2);
  CHECK(a.max_abs == Approx(1e-3).epsilon(1e-3));
  CHECK(a.cosine > 0.999999);
}

TEST_CASE("half_to_double", "[metrics]") {
  const std::vector<double> v = half_to_double({0x3c00, 0xc000, 0x0001, 0x7c00});
  CHECK(v[0] == 1.0);
  CHECK(v[1] == -2.0);
  CHECK(v[2] == std::ldexp(1.0, -24));
  CHECK(std::isinf(v[3]));
}
