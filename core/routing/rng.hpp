#pragma once
// The project's own seeded generator: splitmix64 and an unbiased bounded draw, so routing maps
// are identical on every platform and compiler (never std::uniform_int_distribution/std::shuffle).
#include <cstdint>

namespace tilemix {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) by rejection (Lemire-free, portable).
  uint64_t below(uint64_t n) {
    const uint64_t limit = ~0ull - (~0ull % n);
    uint64_t x;
    do {
      x = next();
    } while (x >= limit);
    return x % n;
  }
  // Uniform double in [0, 1) from the top 53 bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

// Independent stream for (seed, stream) pairs, e.g. one per query-tile row.
inline uint64_t mix_seed(uint64_t seed, uint64_t stream) {
  SplitMix64 s(seed ^ (stream * 0xd1b54a32d192ed03ull + 0x8cb92ba72f3d8dd7ull));
  return s.next();
}

}  // namespace tilemix
