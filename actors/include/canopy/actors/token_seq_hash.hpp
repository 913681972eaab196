#pragma once
// The batcher's duplicate key: a full token sequence, hashed strongly. The index
// holds views of sequences its entries own, so a miss costs no copy of its key.
// Thread contract: pure function objects and plain views; a view is valid while the
// sequence it looks at is alive and unchanged.

#include <canopy/backends/sequence_hash.hpp>
#include <canopy/cache/types.hpp>

#include <algorithm>
#include <cstddef>

namespace canopy::actors {

/// A token sequence owned elsewhere.
struct token_view {
  const cache::token_id* data = nullptr;
  std::size_t size = 0;

  explicit token_view(const cache::token_seq& tokens) : data(tokens.data()), size(tokens.size()) {}
  bool operator==(const token_view& other) const {
    return size == other.size && std::equal(data, data + size, other.data);
  }
};

struct token_seq_hash {
  std::size_t operator()(const token_view& tokens) const {
    return static_cast<std::size_t>(backends::sequence_hash(0, tokens.data, tokens.size));
  }
};

} // namespace canopy::actors
