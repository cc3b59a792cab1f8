#include "core/sizes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "core/error.hpp"

namespace tilemix {
namespace {

std::string factor_text(const SizeFactor& f) {
  return f.name.empty() ? std::to_string(f.value) : std::to_string(f.value) + " (" + f.name + ")";
}

[[noreturn]] void too_large(const std::string& where, const std::string& what, const std::string& terms,
                            bool overflowed, int64_t value, int64_t limit) {
  if (overflowed) throw InputError(where, what + " is " + terms + ", more than " + std::to_string(kMaxCount));
  throw InputError(where, what + " is " + terms + " = " + std::to_string(value) + ", at most " + std::to_string(limit));
}

}  // namespace

int64_t checked_product(const std::string& where, const std::string& what, const std::vector<SizeFactor>& factors,
                        int64_t limit) {
  for (const SizeFactor& f : factors) {
    if (f.value < 0) throw std::invalid_argument("checked_product: negative factor " + factor_text(f) + " of " + what);
  }
  // A zero factor makes the product 0 however large the others are.
  if (std::any_of(factors.begin(), factors.end(), [](const SizeFactor& f) { return f.value == 0; })) return 0;
  int64_t product = 1;
  bool overflowed = false;
  for (const SizeFactor& f : factors) overflowed = overflowed || __builtin_mul_overflow(product, f.value, &product);
  if (!overflowed && product <= limit) return product;
  std::string terms;
  for (const SizeFactor& f : factors) terms += (terms.empty() ? "" : " x ") + factor_text(f);
  too_large(where, what, terms, overflowed, product, limit);
}

int64_t checked_sum(const std::string& where, const std::string& what, const std::vector<int64_t>& terms,
                    int64_t limit) {
  int64_t sum = 0;
  bool overflowed = false;
  for (const int64_t t : terms) {
    if (t < 0) throw std::invalid_argument("checked_sum: negative term " + std::to_string(t) + " of " + what);
    overflowed = overflowed || __builtin_add_overflow(sum, t, &sum);
  }
  if (!overflowed && sum <= limit) return sum;
  std::string text;
  for (const int64_t t : terms) text += (text.empty() ? "" : " + ") + std::to_string(t);
  too_large(where, what, text, overflowed, sum, limit);
}

std::string bytes_text(int64_t bytes) {
  static const char* const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, units[unit]);
}

}  // namespace tilemix
