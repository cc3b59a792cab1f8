#pragma once
// Seeded standard normal draws that are the same on every platform.
#include <cmath>
#include <cstdint>

#include "core/routing/rng.hpp"

namespace tilemix {

// Standard normal draws by Marsaglia and Tsang's ziggurat (128 layers) on the project's own
// generator, so that inputs are the same on every platform (std::normal_distribution is
// implementation-defined). One 64-bit draw gives the layer (low bits) and a signed 32-bit value
// (high bits); about 99% of draws return after one table comparison.
class NormalStream {
 public:
  explicit NormalStream(uint64_t seed) : rng_(seed) {}
  double next() {
    const Tables& t = tables();
    for (;;) {
      const uint64_t u = rng_.next();
      const int layer = static_cast<int>(u & 127u);
      const int32_t hz = static_cast<int32_t>(u >> 32);
      const double x = hz * t.w[layer];
      if (std::abs(static_cast<double>(hz)) < t.k[layer]) return x;
      if (layer == 0) {  // the tail beyond r, by Marsaglia's exponential method
        double xt, y;
        do {
          xt = -std::log(open_uniform()) / kR;
          y = -std::log(open_uniform());
        } while (y + y < xt * xt);
        return hz > 0 ? kR + xt : -kR - xt;
      }
      if (t.f[layer] + open_uniform() * (t.f[layer - 1] - t.f[layer]) < std::exp(-0.5 * x * x)) return x;
    }
  }

 private:
  static constexpr double kR = 3.442619855899;       // start of the tail
  static constexpr double kV = 9.91256303526217e-3;  // area of each layer
  struct Tables {
    double k[128], w[128], f[128];
  };
  static const Tables& tables() {
    static const Tables t = [] {
      Tables z{};
      const double m = 2147483648.0;  // 2^31: values are signed 32-bit
      double dn = kR, tn = kR;
      const double q = kV / std::exp(-0.5 * dn * dn);
      z.k[0] = dn / q * m;
      z.k[1] = 0.0;
      z.w[0] = q / m;
      z.w[127] = dn / m;
      z.f[0] = 1.0;
      z.f[127] = std::exp(-0.5 * dn * dn);
      for (int i = 126; i >= 1; --i) {
        dn = std::sqrt(-2.0 * std::log(kV / dn + std::exp(-0.5 * dn * dn)));
        z.k[i + 1] = dn / tn * m;
        tn = dn;
        z.f[i] = std::exp(-0.5 * dn * dn);
        z.w[i] = dn / m;
      }
      return z;
    }();
    return t;
  }
  double open_uniform() { return 1.0 - rng_.uniform(); }  // (0, 1]: safe for log

  SplitMix64 rng_;
};

}  // namespace tilemix
