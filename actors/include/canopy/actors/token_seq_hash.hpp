#pragma once
// Hashing of full token sequences, the duplicate key of the batcher.
// Thread contract: pure function object.

#include <canopy/backends/sequence_hash.hpp>
#include <canopy/cache/types.hpp>

#include <cstddef>

namespace canopy::actors {

struct token_seq_hash {
  std::size_t operator()(const cache::token_seq& tokens) const {
    return static_cast<std::size_t>(backends::sequence_hash(0, tokens.data(), tokens.size()));
  }
};

} // namespace canopy::actors
