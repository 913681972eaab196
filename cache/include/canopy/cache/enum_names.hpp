#pragma once
// One table of names per enum: a value's name and a name's value are both read from
// the same table, so the two directions cannot disagree and a new value is named in
// one place. Lives in canopy::cache, the target every other one builds on.
// Thread contract: constant data and pure functions.

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace canopy {

template <class Enum> struct enum_name {
  Enum value;
  std::string_view name;
};

/// The name of `value` in `table`, or `unknown` when the table lacks it.
template <class Enum, std::size_t N>
constexpr std::string_view name_of(const std::array<enum_name<Enum>, N>& table,
                                   Enum value, std::string_view unknown = "unknown") {
  for (const auto& entry : table)
    if (entry.value == value)
      return entry.name;
  return unknown;
}

/// The value named `name` in `table`, or nullopt.
template <class Enum, std::size_t N>
constexpr std::optional<Enum> value_of(const std::array<enum_name<Enum>, N>& table,
                                       std::string_view name) {
  for (const auto& entry : table)
    if (entry.name == name)
      return entry.value;
  return std::nullopt;
}

/// Every value of `table`, in its order.
template <class Enum, std::size_t N>
std::vector<Enum> values_of(const std::array<enum_name<Enum>, N>& table) {
  std::vector<Enum> out;
  for (const auto& entry : table)
    out.push_back(entry.value);
  return out;
}

} // namespace canopy
