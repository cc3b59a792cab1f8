#pragma once
// Element and byte counts made from sizes a user gives (config shapes, --set values, .npy headers,
// axis lengths). Every such product goes through checked_product, so that a count past its limit
// (2^63 - 1 unless a smaller one is asked for) is an input error that names where the sizes came
// from and each factor, before anything is allocated (SPEC 9).
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace tilemix {

constexpr int64_t kMaxCount = std::numeric_limits<int64_t>::max();

// One factor of a count and what it is ("total_q", "hq", "bytes"); the name may be empty.
struct SizeFactor {
  SizeFactor(int64_t v, std::string n = "") : value(v), name(std::move(n)) {}
  int64_t value;
  std::string name;
};

// The product of `factors` (each >= 0). Throws InputError(where, ...) when it passes `limit`:
// "<what> is 2147483647 (seq_len) x 1048576 (batch) x ... = more than 9223372036854775807" (or the
// product, and "at most <limit>", when it fits 64 bits but not the limit).
int64_t checked_product(const std::string& where, const std::string& what, const std::vector<SizeFactor>& factors,
                        int64_t limit = kMaxCount);

// The sum of counts, with the same error when it passes `limit`.
int64_t checked_sum(const std::string& where, const std::string& what, const std::vector<int64_t>& terms,
                    int64_t limit = kMaxCount);

// "1.5 GiB", "12 KiB", "100 bytes": a byte count for messages.
std::string bytes_text(int64_t bytes);

}  // namespace tilemix
