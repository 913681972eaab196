#pragma once
// The batcher's duplicate key: a query's partition and full token sequence (equal
// sequences of two partitions are two computations: nothing crosses partitions). The
// index holds views of queries its entries own, so a miss costs no copy of its key,
// and each view carries its hash, so a query looked up, inserted and later erased is
// hashed once.
// Thread contract: plain views; a view is valid while the query it looks at is alive
// and unchanged.

#include <canopy/messages/query.hpp>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <string_view>

namespace canopy::actors {

/// A query's key, owned elsewhere, with its hash.
struct query_key {
  const cache::token_id* data = nullptr;
  std::size_t size = 0;
  std::string_view partition;
  std::size_t hash = 0;

  explicit query_key(const messages::query& q) : query_key(q, hash_of(q)) {}
  /// A view of a query whose hash_of() is known.
  query_key(const messages::query& q, std::size_t known_hash)
      : data(q.tokens.data()), size(q.tokens.size()), partition(q.partition),
        hash(known_hash) {}

  bool operator==(const query_key& other) const {
    return size == other.size && partition == other.partition &&
           std::equal(data, data + size, other.data);
  }

  /// The standard library's byte hash over the ids (and the partition's, when it has
  /// one): keys only live in one process, and equality settles collisions, so what
  /// counts is speed (this reads 8 bytes a step; the sequence hash the backends chain
  /// token by token is several times slower).
  static std::size_t hash_of(const messages::query& q) {
    const auto& tokens = q.tokens;
    const auto h = std::hash<std::string_view>{}(
        std::string_view(reinterpret_cast<const char*>(tokens.data()),
                         tokens.size() * sizeof(cache::token_id)));
    if (q.partition.empty())
      return h;
    return h ^ (std::hash<std::string_view>{}(q.partition) * 0x9E3779B97F4A7C15ULL);
  }
};

struct query_key_hash {
  std::size_t operator()(const query_key& key) const { return key.hash; }
};

/// Whether two queries may share cached rows, KV or a computation.
inline bool same_partition(const messages::query& a, const messages::query& b) {
  return a.partition == b.partition;
}

} // namespace canopy::actors
