#pragma once
// A strong, order-sensitive 64-bit hash of a token sequence, computed one token at a
// time, so a KV entry can carry the hash of its prefix. Unlike genlm-backend's mock
// seed sum((i+1)*t), [2] and [0, 1] hash differently.
// Thread contract: pure functions.

#include <canopy/cache/types.hpp>

#include <cstddef>
#include <cstdint>

namespace canopy::backends {

/// Hash of the empty sequence under `seed`.
std::uint64_t sequence_hash_start(std::uint64_t seed);
/// Hash of (sequence with hash `state`) + [token].
std::uint64_t sequence_hash_step(std::uint64_t state, cache::token_id token);
/// Hash of tokens[0..n) under `seed`.
std::uint64_t sequence_hash(std::uint64_t seed, const cache::token_id* tokens,
                            std::size_t n);

} // namespace canopy::backends
