#pragma once
// Overflow-checked size arithmetic for values read from untrusted files (private to
// backends/): a crafted header must give an error, never a wrapped size that passes a
// bounds check.
// Thread contract: pure functions.

#include <cstdint>
#include <optional>
#include <vector>

namespace canopy::backends::detail {

inline std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out))
    return std::nullopt;
  return out;
}

inline std::optional<std::uint64_t> checked_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t out = 0;
  if (__builtin_add_overflow(a, b, &out))
    return std::nullopt;
  return out;
}

/// Product of non-negative dims times `scale`, or nullopt on overflow or a negative dim.
inline std::optional<std::uint64_t> checked_product(const std::vector<std::int64_t>& dims,
                                                    std::uint64_t scale = 1) {
  std::uint64_t out = scale;
  for (std::int64_t dim : dims) {
    if (dim < 0)
      return std::nullopt;
    auto next = checked_mul(out, static_cast<std::uint64_t>(dim));
    if (!next)
      return std::nullopt;
    out = *next;
  }
  return out;
}

} // namespace canopy::backends::detail
