#pragma once
// The 64-bit finalizer shared by the sequence hash and the mock's logits (private to
// backends/). It is a bijection with full avalanche, so a chain of it separates
// sequences and a counter fed through it is a good, cheap random stream.
// Thread contract: pure function.

#include <cstdint>

namespace canopy::backends::detail {

/// splitmix64's finalizer (Stafford's variant 13).
inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

} // namespace canopy::backends::detail
