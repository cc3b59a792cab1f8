#pragma once
// One table of {value, name} pairs per named enum, beside the enum, serves both printing and
// reading: the name printed for a value is its first entry's, and every entry's name reads back
// as its value (a later entry of the same value is another spelling that is read, not printed).
// Plain C++ (the kernels include the tables of their choices).
#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace tilemix {

template <class Enum>
struct EnumName {
  Enum value;
  const char* name;
};

// The name printed for `value` ("?" for a value the table lacks).
template <class Enum, size_t N>
constexpr const char* enum_name(const EnumName<Enum> (&table)[N], Enum value) {
  for (const auto& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return "?";
}

template <class Enum, size_t N>
std::optional<Enum> parse_enum(const EnumName<Enum> (&table)[N], const std::string& name) {
  for (const auto& entry : table) {
    if (name == entry.name) return entry.value;
  }
  return std::nullopt;
}

// Every name that reads, in table order (what an error lists as expected).
template <class Enum, size_t N>
std::vector<std::string> enum_names(const EnumName<Enum> (&table)[N]) {
  std::vector<std::string> names;
  for (const auto& entry : table) names.emplace_back(entry.name);
  return names;
}

// Every value once, in the order of its first entry.
template <class Enum, size_t N>
std::vector<Enum> enum_values(const EnumName<Enum> (&table)[N]) {
  std::vector<Enum> values;
  for (const auto& entry : table) {
    if (std::find(values.begin(), values.end(), entry.value) == values.end()) values.push_back(entry.value);
  }
  return values;
}

}  // namespace tilemix
