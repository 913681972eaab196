#pragma once
// A view of the token trie (cache/trie_view.hpp) as it travels: from the cache actor
// to a host or the HTTP gateway, which may run in another actor system.
// Thread contract: plain values.

#include <canopy/cache/trie_view.hpp>

#include <caf/meta/type_name.hpp>

namespace canopy::cache {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, trie_view_kv& x) {
  return f(caf::meta::type_name("trie_view_kv"), x.worker, x.on_host, x.bytes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, trie_view_node& x) {
  return f(caf::meta::type_name("trie_view_node"), x.token, x.depth, x.parent,
           x.row_bytes, x.kv, x.hits, x.locks, x.children);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, trie_view& x) {
  return f(caf::meta::type_name("trie_view"), x.nodes, x.truncated);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, trie_view_limits& x) {
  return f(caf::meta::type_name("trie_view_limits"), x.depth, x.max_children,
           x.max_nodes);
}

} // namespace canopy::cache
