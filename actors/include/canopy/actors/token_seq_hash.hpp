#pragma once
// The batcher's duplicate key: a full token sequence. The index holds views of
// sequences its entries own, so a miss costs no copy of its key, and each view carries
// its hash, so a sequence looked up, inserted and later erased is hashed once.
// Thread contract: plain views; a view is valid while the sequence it looks at is
// alive and unchanged.

#include <canopy/cache/types.hpp>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <string_view>

namespace canopy::actors {

/// A token sequence owned elsewhere, with its hash.
struct token_view {
  const cache::token_id* data = nullptr;
  std::size_t size = 0;
  std::size_t hash = 0;

  explicit token_view(const cache::token_seq& tokens)
      : token_view(tokens, hash_of(tokens)) {}
  /// A view of tokens whose hash_of() is known.
  token_view(const cache::token_seq& tokens, std::size_t known_hash)
      : data(tokens.data()), size(tokens.size()), hash(known_hash) {}

  bool operator==(const token_view& other) const {
    return size == other.size && std::equal(data, data + size, other.data);
  }

  /// The standard library's byte hash over the ids: keys only live in one process, and
  /// equality settles collisions, so what counts is speed (this reads 8 bytes a step;
  /// the sequence hash the backends chain token by token is several times slower).
  static std::size_t hash_of(const cache::token_seq& tokens) {
    return std::hash<std::string_view>{}(
      std::string_view(reinterpret_cast<const char*>(tokens.data()),
                       tokens.size() * sizeof(cache::token_id)));
  }
};

struct token_seq_hash {
  std::size_t operator()(const token_view& tokens) const { return tokens.hash; }
};

} // namespace canopy::actors
