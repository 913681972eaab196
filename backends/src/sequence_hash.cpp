#include <canopy/backends/sequence_hash.hpp>

#include "checkpoints/mix64.hpp"

namespace canopy::backends {

namespace {

// Odd, so multiplying by it is a bijection: with mix64 a bijection too, distinct tokens
// give distinct next states from the same state.
constexpr std::uint64_t token_multiplier = 0x9E3779B97F4A7C15ULL;
// Keeps the empty sequence's hash away from the raw seed (seed 0 would hash to 0).
constexpr std::uint64_t start_salt = 0xD6E8FEB86659FD93ULL;

} // namespace

std::uint64_t sequence_hash_start(std::uint64_t seed) {
  return detail::mix64(seed ^ start_salt);
}

std::uint64_t sequence_hash_step(std::uint64_t state, cache::token_id token) {
  // Through uint32 so a (contract-breaking) negative id is still well defined.
  const auto value = static_cast<std::uint64_t>(static_cast<std::uint32_t>(token));
  return detail::mix64(state ^ (value * token_multiplier));
}

std::uint64_t sequence_hash(std::uint64_t seed, const cache::token_id* tokens,
                            std::size_t n) {
  std::uint64_t state = sequence_hash_start(seed);
  for (std::size_t i = 0; i < n; ++i)
    state = sequence_hash_step(state, tokens[i]);
  return state;
}

} // namespace canopy::backends
