#pragma once
// The tree under token_trie: nodes linked by parent and by (parent, token), named
// partitions, recycled ids, and what each node holds (its row, its KV entries, its lock
// counts) in a table beside the nodes. The two ledgers (row_ledger, kv_ledger) account
// for what nodes hold; this tree only links, allocates and prunes, and knows neither.
// Internal to canopy::cache (not installed).
//
// Thread contract: not thread-safe; owned by one token_trie.

#include <canopy/cache/child_index.hpp>
#include <canopy/cache/token_trie.hpp>

#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace canopy::cache::detail {

// A ledger's eviction candidates for one resource, ordered by the policy's key.
using candidate_set = std::set<std::pair<eviction_key, node_id>>;

// An entry with handle no_kv is a tombstone (windows only, Note [windowed KV] in
// kv_ledger.cpp): the node's KV is gone but children still hold KV built on it.
struct kv_entry {
  worker_id worker = 0;
  kv_handle handle = no_kv;
  std::size_t bytes = 0;
  // Without a window KV is prefix-closed, so only a node holding KV on a worker can
  // have children holding KV there; with one, its tombstone keeps the count. So the
  // count lives in the entry (the root keeps none).
  std::uint32_t kv_children = 0;
  std::uint32_t device_children = 0; // of those, children holding device-tier KV
  bool on_host = false;              // the host tier holds it (Note [host tier])
  bool candidate = false;
  // Its element of its tier's candidate set (kv_candidates or host_candidates of its
  // worker) while a candidate.
  candidate_set::iterator slot;
};

// What match and insert read at every node of a path, in one cache line: what a node
// holds (holding) lies apart and is read only where a row or KV is asked for. There is
// no stored eviction key: it is a function of `stats`, needed only for candidates.
struct node {
  node_stats stats;
  token_id token = 0;
  node_id parent = root_node;
  std::uint32_t depth = 0;
  std::uint32_t children = 0;
  std::uint32_t locks = 0;
  std::uint32_t row_children = 0; // children holding a row
  node_id last_child = root_node; // a guess at the next child asked for; see find_child
  bool live = false;
  bool row_candidate = false;
  bool kv_candidate = false; // some entry of its holding's kv is a candidate
  bool holds_kv = false;     // its holding's kv is not empty (tombstones count)
};
static_assert(sizeof(node) <= 64, "a node's walked part must fit one cache line");

struct holding {
  row_ptr row;
  row_extra_ptr extra; // beside the row, dropped with it
  // row->bytes() plus extra->bytes(), kept here because locking a path accounts the bytes
  // of every row on it: reading them from the rows would be a cache (and TLB) miss per
  // node, as rows lie scattered over the whole budget.
  std::size_t row_bytes = 0;
  candidate_set::iterator row_slot; // its element of row candidates while a candidate
  std::vector<kv_entry> kv;         // at most one entry per worker
  std::uint32_t own_locks = 0;      // lock() calls on this node not yet undone
  // The lock state the ledgers account for (Note [settled locks] in token_trie.cpp):
  // the node's `locks != 0` once settled. Here, not in the node, which a lock's walk
  // reads and which fills its cache line.
  bool ledger_locked = false;
  // Windows only: own locks of this node and of nodes up to W-1 levels below it. KV
  // is kept while it is non-zero.
  std::uint32_t window_locks = 0;
};

// The holding's entry for `worker` (a tombstone too), or nullptr; const-ness follows
// the holding's.
template <class Holding>
auto find_kv(Holding& x, worker_id worker) -> decltype(x.kv.data()) {
  for (auto& e : x.kv)
    if (e.worker == worker)
      return &e;
  return nullptr;
}

// The entry for `worker` when the holding has KV there (no tombstone), or nullptr.
template <class Holding>
auto held_kv(Holding& x, worker_id worker) -> decltype(x.kv.data()) {
  auto* e = find_kv(x, worker);
  return e && e->handle != no_kv ? e : nullptr;
}

// `extra` more bytes fit under `budget` with `used` taken, without overflowing.
inline bool fits_in(std::size_t used, std::size_t extra, std::size_t budget) {
  return extra <= budget && used <= budget - extra;
}

[[noreturn]] void violation(const std::string& what);
std::string node_name(node_id id);

// Leaves `set` if in it (flag), by the element kept (slot): no search of the set.
void leave_candidates(candidate_set& set, bool& flag, candidate_set::iterator& slot);

// Moves an element to key `to` without reallocating it. Keys only grow (the clock,
// hits and the highest priority never go back) and under LRU the node becomes the
// newest, so the end of the set is the hint that usually saves a search.
void move_candidate(candidate_set& set, candidate_set::iterator& slot,
                    const eviction_key& to);

struct node_tree {
  trie_config config;
  std::vector<node> nodes;   // indexed by node_id; dead slots are on free_ids
  std::vector<holding> held; // indexed by node_id, beside nodes
  std::vector<node_id> free_ids;
  child_index children;                                     // child_key -> child
  std::unordered_map<std::string, node_id> partition_roots; // Note [partitions]
  std::unordered_map<node_id, std::string> partition_names; // the other way
  trie_stats stats; // each part keeps its own figures here
  std::uint64_t clock = 0;
  std::uint64_t creations = 0;
  // Nodes whose lock state changed since the ledgers were last settled (repeats, and
  // ids removed since, are harmless: settling compares states).
  std::vector<node_id> lock_changes;

  explicit node_tree(const trie_config& c);

  bool exists(node_id id) const { return id < nodes.size() && nodes[id].live; }

  // root_node or a partition's root: where every walk up a path ends.
  bool is_root(node_id id) const { return nodes[id].depth == 0; }

  bool windowed() const { return config.kv_window != 0; }

  const node& checked(node_id id) const;

  eviction_key key_of(const node_stats& s) const {
    return make_eviction_key(config.policy, s);
  }
  eviction_key key_of(node_id id) const { return key_of(nodes[id].stats); }

  // Calls visit(n) for `end` and its W-1 nearest ancestors (fewer near the root): the
  // nodes whose KV a pass continuing from `end`'s child reads, plus `end`'s parent
  // (Note [windowed KV]). Nothing without a window.
  template <class Visit> void for_window(node_id end, Visit visit) const {
    node_id cur = end;
    for (std::uint32_t k = 0; k < config.kv_window && !is_root(cur);
         ++k, cur = nodes[cur].parent)
      visit(cur);
  }

  static std::uint64_t child_key(node_id parent, token_id token) {
    return (std::uint64_t{parent} << 32) | static_cast<std::uint32_t>(token);
  }

  // The child of `parent` for `token`, or root_node (nobody's child) when there is
  // none. Most nodes have a single child, and paths are walked again and again, so the
  // child made or found last is checked before the index: a hit costs no hashing and
  // no random access. The guess may name a removed or recycled node, hence the checks.
  node_id find_child(node_id parent, token_id token) {
    node& p = nodes[parent];
    const node& guess = nodes[p.last_child];
    if (p.last_child != root_node && guess.live && guess.parent == parent &&
        guess.token == token && guess.depth != 0) // a partition's root is nobody's child
      return p.last_child;
    const node_id* child = children.find(child_key(parent, token));
    if (!child)
      return root_node;
    p.last_child = *child;
    return *child;
  }

  // The node of `node`'s path at `depth` (at most its own depth).
  node_id ancestor(node_id node, std::uint32_t depth) const {
    while (nodes[node].depth > depth)
      node = nodes[node].parent;
    return node;
  }

  // A new child of `parent` for `token`.
  node_id new_node(node_id parent, token_id token, std::int32_t priority);

  // The root of the named partition, or no_node when it has none.
  node_id partition_root(std::string_view name) const;
  // The root of the named partition, made when it has none.
  node_id make_partition_root(std::string_view name);

  // Removes `id` if it is empty (holds nothing, no children, unlocked), then each
  // ancestor it leaves empty.
  void prune(node_id id);

  // [nodes] whether each node lies in a partition whose name `pick` chooses.
  std::vector<bool> in_partitions(const partition_filter& pick) const;

  // The tree's invariants: links, depths, child and lock counts, partitions, the free
  // list and the node statistics. Throws std::logic_error naming the first violation.
  void check() const;

private:
  node_id allocate(node_id parent, token_id token, std::int32_t priority,
                   std::uint32_t depth);
  bool removable(node_id id) const;
};

// Enters or leaves `set` as `wanted` says; true when it did. The key is made only on
// entering: a lock walking a long path changes few nodes' candidacy, and making keys
// for the others was most of its cost.
bool set_candidate(candidate_set& set, bool& flag, candidate_set::iterator& slot,
                   node_id id, const node_tree& tree, bool wanted);

} // namespace canopy::cache::detail
