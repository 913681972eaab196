#pragma once
// Vocabulary of the cache: small integer types shared by every layer of Canopy.
// Thread contract: plain values.

#include <cstdint>
#include <vector>

namespace canopy::cache {

/// A token id of the model's vocabulary, in [0, vocab).
using token_id = std::int32_t;

/// A token sequence; the key of every query.
using token_seq = std::vector<token_id>;

/// Index of a worker (device) in the engine, 0-based.
using worker_id = std::uint32_t;

/// Opaque id of one token's KV entry, owned by the worker that made it; 0 is "none".
using kv_handle = std::uint64_t;
inline constexpr kv_handle no_kv = 0;

/// Index of a trie node; the root (of the shared partition) is always node 0.
using node_id = std::uint32_t;
inline constexpr node_id root_node = 0;
/// No node: what a match in a partition that has no nodes yet ends at.
inline constexpr node_id no_node = UINT32_MAX;

} // namespace canopy::cache
