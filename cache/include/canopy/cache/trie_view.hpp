#pragma once
// A view of part of the token trie for people to read (token_trie::view): the node of
// a prefix and the nodes within a few levels below it, with what each holds. A copy,
// not a window: it stays valid whatever the trie does next.
// Thread contract: plain values.

#include <canopy/cache/types.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace canopy::cache {

/// A worker's KV of one node.
struct trie_view_kv {
  worker_id worker = 0;
  bool on_host = false; // in the worker's host tier, not on its device
  std::size_t bytes = 0;
};

struct trie_view_node {
  token_id token = 0;        // the last token of its prefix (0 at a partition's root)
  std::uint32_t depth = 0;   // its prefix's length
  std::int32_t parent = -1;  // its parent's index in the view; -1: the view's top
  std::size_t row_bytes = 0; // its stored row and what is kept beside it; 0: no row
  std::vector<trie_view_kv> kv;
  std::uint64_t hits = 0;     // matches that passed through it
  std::uint32_t locks = 0;    // queries using it now
  std::uint32_t children = 0; // all of them, in the view or not
};

struct trie_view {
  /// Breadth-first from the prefix's node: every node's parent comes before it, and
  /// siblings come most hit first. Empty when the prefix is not in the trie.
  std::vector<trie_view_node> nodes;
  bool truncated = false; // nodes below the top were left out to keep to max_nodes
};

/// How much of the trie a view takes.
struct trie_view_limits {
  std::uint32_t depth = 2;         // levels below the prefix's node
  std::uint32_t max_children = 16; // of each node, the most hit
  std::uint32_t max_nodes = 1024;  // in the whole view, the top included
};

} // namespace canopy::cache
