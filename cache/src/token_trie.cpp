#include <canopy/cache/token_trie.hpp>

#include <canopy/cache/child_index.hpp>

#include <algorithm>
#include <deque>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

namespace canopy::cache {

// Note [windowed KV]
// With a sliding window W a token attends to itself and the W-1 tokens before it, so
// a pass continuing a prefix of length L reads the KV of positions L-W+1 .. L-1 only
// (the worker's kv_slots::chain walks just those), and KV older than that is dead
// weight for every sequence that continues from L or deeper. The trie uses that:
//  - KV is kept (never evicted) within W-1 levels above a lock(), the node's own
//    included: window_locks counts the locks that reach each node, maintained in
//    O(W) per lock. A query's lock keeps the W-1 tokens its pass reads once it
//    continues from its parent; a pass continuing from further up has the cache
//    lock that prefix's end too (a pin), so what a pass reads is never released
//    while it runs. Every other KV entry is a candidate, leaves or not: rows stay
//    locked along whole paths as before.
//  - A match or insert touches (for the eviction policy) only the W nodes that the
//    window of its end covers: an SMC particle's prompt, far above every particle,
//    is then older than any particle's window, and the KV evicted first is what no
//    query has read lately, not the window of the particle matched first.
//  - A KV prefix is usable when it ends a run of W-1 nodes holding KV, or a shorter
//    run that starts at depth 1 (collect_kv).
//  - Dropping a node's KV while children hold KV there leaves a tombstone entry
//    (handle no_kv) that counts those children. No KV may be attached at a node with
//    a tombstone: the worker linked the children's KV to the KV dropped, so a new run
//    joined to them would be a prefix the worker cannot walk. The tombstone goes with
//    the last child's KV.
// Without a window none of this applies: KV is prefix-closed and locks keep whole
// paths.

// Note [host tier]
// A worker with a host budget keeps KV in two tiers: its device (what passes read) and
// its host memory. Both count as holding KV (KV is prefix-closed across them), and
// each tier has its budget, accounting and candidate set:
//  - device candidates: device KV, not kept, with no child holding device KV there
//    (device_children); evicting one demotes it to the host tier when the host can make
//    room, else drops it. So the device keeps the top of each path, the host the rest;
//  - host candidates: host KV, not kept, with no child holding KV at all: dropping it
//    must leave KV prefix-closed;
//  - promote_kv moves a locked path's host KV back, from the root down, within the
//    device budget (evicting device candidates, which the lock keeps off the path);
//  - no KV is attached under host KV (a pass reads its prefix promoted). With
//    demotion leaf-first and promotion root-first, every child of host KV is then on
//    the host: host KV hangs in subtrees below device KV. So a device candidate that
//    cannot be demoted (the host's room is locked) has only host descendants, all
//    unlocked, which go first: their leaves are host candidates.
// Demotions are queued for the owner to send (take_demoted); promotions are not: the
// worker moves host KV back itself when a pass reads it. No host tier under a window.

// Note [partitions]
// A named partition's root is a node at depth 0 whose parent is root_node; it holds
// nothing and is found by name (partition_roots), not through the children index, so
// no token sequence can lead into it. Below it everything is as below root_node: the
// depth of a node counts tokens from its partition's root, and every walk up a path
// stops at depth 0 (is_root), never at root_node itself. Its lock count is its
// children in use, as any node's, and root_node counts it as one child in use more, so
// locks climb as they always did. It is pruned like any empty node, which removes its
// name: the names held are those of partitions with nodes, bounded by the nodes.

namespace {

using candidate_set = std::set<std::pair<eviction_key, node_id>>;

// An entry with handle no_kv is a tombstone (windows only, Note [windowed KV]): the
// node's KV is gone but children still hold KV built on it.
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
  // row->bytes(), kept here because locking a path accounts the bytes of every row on
  // it: reading them from the rows would be a cache (and TLB) miss per node, as rows
  // lie scattered over the whole budget.
  std::size_t row_bytes = 0;
  candidate_set::iterator row_slot; // its element of row_candidates while a candidate
  std::vector<kv_entry> kv;         // at most one entry per worker
  std::uint32_t own_locks = 0;      // lock() calls on this node not yet undone
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

std::uint64_t child_key(node_id parent, token_id token) {
  return (std::uint64_t{parent} << 32) | static_cast<std::uint32_t>(token);
}

// `extra` more bytes fit under `budget` with `used` taken, without overflowing.
bool fits_in(std::size_t used, std::size_t extra, std::size_t budget) {
  return extra <= budget && used <= budget - extra;
}

[[noreturn]] void violation(const std::string& what) {
  throw std::logic_error("token_trie invariant violated: " + what);
}

std::string node_name(node_id id) {
  return "node " + std::to_string(id);
}

} // namespace

struct token_trie::impl {
  trie_config config;
  std::vector<node> nodes;   // indexed by node_id; dead slots are on free_ids
  std::vector<holding> held; // indexed by node_id, beside nodes
  std::vector<node_id> free_ids;
  child_index children; // child_key -> child
  candidate_set row_candidates;
  // [workers]. A deque, so adding a worker never moves the sets that kv entries hold
  // iterators into.
  std::deque<candidate_set> kv_candidates;
  std::deque<candidate_set> host_candidates; // [workers] (Note [host tier])
  std::vector<kv_release> released;
  std::vector<kv_release> demoted;
  trie_stats stats;
  std::uint64_t clock = 0;
  std::uint64_t creations = 0;
  // What locked nodes hold: no eviction can free it, which makes refusals exact.
  std::size_t locked_row_bytes = 0;
  std::size_t locked_rows = 0;
  std::vector<std::size_t> locked_kv_bytes;   // [workers]
  std::vector<std::size_t> kv_budgets;        // [workers] each worker's own KV budget
  std::vector<std::size_t> locked_host_bytes; // [workers]
  std::vector<std::size_t> host_budgets;      // [workers] 0: no host tier
  std::unordered_map<std::string, node_id> partition_roots; // Note [partitions]
  std::unordered_map<node_id, std::string> partition_names; // the other way

  explicit impl(trie_config c)
      : config(c), kv_candidates(c.workers), host_candidates(c.workers),
        locked_kv_bytes(c.workers), kv_budgets(c.workers, c.kv_budget_bytes),
        locked_host_bytes(c.workers), host_budgets(c.workers, c.kv_host_budget_bytes) {
    check_host_tier(c.kv_host_budget_bytes);
    stats.kv_entries.assign(c.workers, 0);
    stats.kv_bytes.assign(c.workers, 0);
    stats.kv_peak_bytes.assign(c.workers, 0);
    stats.kv_host_entries.assign(c.workers, 0);
    stats.kv_host_bytes.assign(c.workers, 0);
    stats.nodes = 1;
    nodes.emplace_back();
    held.emplace_back();
    nodes[root_node].live = true;
  }

  bool exists(node_id id) const { return id < nodes.size() && nodes[id].live; }

  // root_node or a partition's root: where every walk up a path ends.
  bool is_root(node_id id) const { return nodes[id].depth == 0; }

  bool windowed() const { return config.kv_window != 0; }

  void check_host_tier(std::size_t host_budget) const {
    if (host_budget != 0 && windowed())
      throw std::invalid_argument("token_trie: a KV host tier is not supported with a "
                                  "sliding window");
  }

  // The candidate set of the entry's tier.
  candidate_set& tier_set(const kv_entry& e) {
    return e.on_host ? host_candidates[e.worker] : kv_candidates[e.worker];
  }

  // KV no eviction may take: on a locked node, or under a window, within W-1 levels
  // above a lock (Note [windowed KV]).
  bool kv_kept(node_id id) const {
    return windowed() ? held[id].window_locks != 0 : nodes[id].locks != 0;
  }

  const node& checked(node_id id) const {
    if (!exists(id))
      throw std::out_of_range("token_trie: no " + node_name(id));
    return nodes[id];
  }

  void check_worker(worker_id worker) const {
    if (worker >= config.workers)
      throw std::out_of_range("token_trie: no worker " + std::to_string(worker));
  }

  // --- candidate sets (Note [eviction candidates]) ---

  eviction_key key_of(const node_stats& s) const {
    return make_eviction_key(config.policy, s);
  }

  // Each member's element is kept (slot), so leaving a set or moving in it needs no
  // search of the set.
  void set_candidate(candidate_set& set, bool& flag, candidate_set::iterator& slot,
                     node_id id, bool wanted) {
    if (flag == wanted)
      return;
    if (wanted)
      slot = set.emplace(key_of(nodes[id].stats), id).first;
    else
      set.erase(slot);
    flag = wanted;
  }

  void refresh_row(node_id id) {
    node& x = nodes[id];
    const bool wanted = held[id].row && x.locks == 0 && x.row_children == 0;
    set_candidate(row_candidates, x.row_candidate, held[id].row_slot, id, wanted);
  }

  // Brings the node's summary of its KV entries up to date after they changed.
  void sync_kv_flags(node_id id) {
    const std::vector<kv_entry>& kv = held[id].kv;
    nodes[id].holds_kv = !kv.empty();
    nodes[id].kv_candidate =
        std::any_of(kv.begin(), kv.end(), [](const kv_entry& e) { return e.candidate; });
  }

  // Without a window only KV leaves go (the rest is some leaf's prefix); with one,
  // any KV not kept, since a kept node's KV never reaches more than W-1 levels up.
  // On the host tier, only entries without children holding KV (Note [host tier]).
  bool kv_candidate_rule(node_id id, const kv_entry& e) const {
    if (e.handle == no_kv || kv_kept(id))
      return false;
    return e.on_host ? e.kv_children == 0 : windowed() || e.device_children == 0;
  }

  void refresh_kv(node_id id, kv_entry& e) {
    set_candidate(tier_set(e), e.candidate, e.slot, id, kv_candidate_rule(id, e));
    sync_kv_flags(id);
  }

  void refresh_all(node_id id) {
    refresh_row(id);
    for (kv_entry& e : held[id].kv)
      refresh_kv(id, e);
  }

  // Only candidates sit in sets, so only they pay for more than the statistics.
  void touch(node_id id, std::int32_t priority, bool hit) {
    node& x = nodes[id];
    node_stats next = x.stats;
    next.last_access = clock;
    next.priority = std::max(next.priority, priority);
    next.hits += hit ? 1 : 0;
    if (x.row_candidate || x.kv_candidate)
      reposition(id, key_of(x.stats), key_of(next));
    x.stats = next;
  }

  // Calls visit(n) for `end` and its W-1 nearest ancestors (fewer near the root): the
  // nodes whose KV a pass continuing from `end`'s child reads, plus `end`'s parent
  // (Note [windowed KV]). Nothing without a window.
  template <class Visit> void for_window(node_id end, Visit visit) const {
    node_id cur = end;
    for (std::uint32_t k = 0; k < config.kv_window && !is_root(cur);
         ++k, cur = nodes[cur].parent)
      visit(cur);
  }

  // Under a window a walk uses only the nodes its end's window covers (Note
  // [windowed KV]): those W are touched, the rest of the path keeps its statistics.
  void touch_window(node_id end, std::int32_t priority, bool hit) {
    for_window(end, [&](node_id n) { touch(n, priority, hit); });
  }

  // Moves the node's elements to key `to` without reallocating them. Keys only grow
  // (the clock, hits and the highest priority never go back) and under LRU the node
  // becomes the newest, so the end of the set is the hint that usually saves a search.
  void reposition(node_id id, const eviction_key& from, const eviction_key& to) {
    if (from == to)
      return; // FIFO keys never move
    const auto move = [&](candidate_set& set, candidate_set::iterator& slot) {
      auto element = set.extract(slot);
      element.value().first = to;
      slot = set.insert(set.end(), std::move(element));
    };
    holding& h = held[id];
    if (nodes[id].row_candidate)
      move(row_candidates, h.row_slot);
    for (kv_entry& e : h.kv)
      if (e.candidate)
        move(tier_set(e), e.slot);
  }

  // --- nodes ---

  node_id new_node(node_id parent, token_id token, std::int32_t priority) {
    const node_id id = allocate(parent, token, priority, nodes[parent].depth + 1);
    nodes[parent].last_child = id;
    children.insert(child_key(parent, token), id);
    return id;
  }

  // A live node in a free slot, counted as a child of `parent` (linked by the caller).
  node_id allocate(node_id parent, token_id token, std::int32_t priority,
                   std::uint32_t depth) {
    node_id id;
    if (free_ids.empty()) {
      id = static_cast<node_id>(nodes.size());
      nodes.emplace_back();
      held.emplace_back();
    } else {
      id = free_ids.back();
      free_ids.pop_back();
    }
    node& x = nodes[id];
    x.token = token;
    x.parent = parent;
    x.depth = depth;
    x.live = true;
    x.stats = node_stats{clock, 0, ++creations, priority};
    ++nodes[parent].children;
    ++stats.nodes;
    return id;
  }

  // The root of the named partition, or no_node when it has none.
  node_id partition_root(std::string_view name) const {
    if (name.empty())
      return root_node;
    auto it = partition_roots.find(std::string(name));
    return it == partition_roots.end() ? no_node : it->second;
  }

  // The root of the named partition, made when it has none.
  node_id make_partition_root(std::string_view name) {
    if (auto root = partition_root(name); root != no_node)
      return root;
    const node_id id = allocate(root_node, 0, 0, 0); // found by name, never by a token
    partition_roots.emplace(name, id);
    partition_names.emplace(id, name);
    ++stats.partitions;
    return id;
  }

  // The child of `parent` for `token`, or root_node (nobody's child) when there is none.
  // Most nodes have a single child, and paths are walked again and again, so the child
  // made or found last is checked before the index: a hit costs no hashing and no
  // random access. The guess may name a removed or recycled node, hence the checks.
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

  bool removable(node_id id) const {
    const node& x = nodes[id];
    return id != root_node && !held[id].row && !x.holds_kv && x.children == 0 &&
           x.locks == 0;
  }

  // Removes `id` if it is empty, then each ancestor it leaves empty.
  void prune(node_id id) {
    while (removable(id)) {
      const node_id parent = nodes[id].parent;
      if (is_root(id)) {
        partition_roots.erase(partition_names.at(id));
        partition_names.erase(id);
        --stats.partitions;
      } else {
        children.erase(child_key(parent, nodes[id].token));
      }
      --nodes[parent].children;
      nodes[id] = node{};
      held[id] = holding{};
      free_ids.push_back(id);
      --stats.nodes;
      ++stats.nodes_removed;
      id = parent;
    }
  }

  // --- locks ---

  void account_lock(node_id id, bool locking) {
    const auto add = [locking](std::size_t& total, std::size_t amount) {
      total = locking ? total + amount : total - amount;
    };
    const holding& h = held[id];
    if (h.row) {
      add(locked_row_bytes, h.row_bytes);
      add(locked_rows, 1);
    }
    if (!windowed()) // windows keep KV by window_locks (protect_window)
      for (const kv_entry& e : h.kv)
        add(e.on_host ? locked_host_bytes[e.worker] : locked_kv_bytes[e.worker], e.bytes);
  }

  // A count going 0 -> 1 makes the node in use, which its parent counts as one more
  // child in use; a count already non-zero means the ancestors count it already.
  void lock_path(node_id id) {
    for (node_id cur = id; nodes[cur].locks++ == 0; cur = nodes[cur].parent) {
      ++stats.locked_nodes;
      refresh_all(cur);
      account_lock(cur, true);
      if (cur == root_node)
        return;
    }
  }

  void unlock_path(node_id id) {
    for (node_id cur = id; --nodes[cur].locks == 0; cur = nodes[cur].parent) {
      --stats.locked_nodes;
      refresh_all(cur);
      account_lock(cur, false);
      if (cur == root_node)
        break;
    }
    prune(id);
  }

  // Counts a lock of `id` in window_locks of it and its W-1 nearest ancestors, whose
  // KV the lock then keeps (O(W): Note [windowed KV]).
  void protect_window(node_id id, bool locking) {
    for_window(id, [&](node_id n) {
      holding& h = held[n];
      const bool was_kept = h.window_locks != 0;
      h.window_locks = locking ? h.window_locks + 1 : h.window_locks - 1;
      if (was_kept == (h.window_locks != 0))
        return;
      for (kv_entry& e : h.kv) {
        auto& kept = locked_kv_bytes[e.worker];
        kept = locking ? kept + e.bytes : kept - e.bytes; // a tombstone's bytes are 0
        refresh_kv(n, e);
      }
    });
  }

  // What lock() and unlock() do: the path's lock counts, and under a window the KV
  // above the node.
  void lock_own(node_id id) {
    ++held[id].own_locks;
    lock_path(id);
    if (windowed())
      protect_window(id, true);
  }

  void unlock_own(node_id id) {
    --held[id].own_locks;
    if (windowed())
      protect_window(id, false);
    unlock_path(id);
  }

  // --- resources ---

  void add_row(node_id id, row_ptr row) {
    const node& x = nodes[id];
    holding& h = held[id];
    h.row_bytes = row->bytes();
    h.row = std::move(row);
    stats.logprob_bytes += h.row_bytes;
    ++stats.logprob_entries;
    if (x.locks != 0) {
      locked_row_bytes += h.row_bytes;
      ++locked_rows;
    }
    ++nodes[x.parent].row_children;
    refresh_row(x.parent);
    refresh_row(id);
  }

  void drop_row(node_id id) {
    node& x = nodes[id];
    holding& h = held[id];
    set_candidate(row_candidates, x.row_candidate, h.row_slot, id, false);
    stats.logprob_bytes -= h.row_bytes;
    --stats.logprob_entries;
    if (x.locks != 0) {
      locked_row_bytes -= h.row_bytes;
      --locked_rows;
    }
    h.row.reset();
    h.row_bytes = 0;
    --nodes[x.parent].row_children;
    refresh_row(x.parent);
  }

  void add_kv(node_id id, worker_id worker, kv_handle handle, std::size_t bytes) {
    const node& x = nodes[id];
    std::vector<kv_entry>& kv = held[id].kv;
    kv.push_back(kv_entry{worker, handle, bytes, 0, 0, false, false, {}});
    stats.kv_bytes[worker] += bytes;
    stats.kv_peak_bytes[worker] =
        std::max(stats.kv_peak_bytes[worker], stats.kv_bytes[worker]);
    ++stats.kv_entries[worker];
    if (kv_kept(id))
      locked_kv_bytes[worker] += bytes;
    if (kv_entry* above = find_kv(held[x.parent], worker)) {
      ++above->kv_children;
      ++above->device_children;
      refresh_kv(x.parent, *above);
    }
    refresh_kv(id, kv.back());
  }

  void remove_entry(node_id id, kv_entry* e) {
    std::vector<kv_entry>& kv = held[id].kv;
    *e = kv.back();
    kv.pop_back();
    sync_kv_flags(id);
  }

  // Drops the node's KV on `worker`. Its entry stays as a tombstone while children
  // hold KV there (a window, or a bulk drop reaching a parent first), and a parent's
  // tombstone goes with its last such child.
  void drop_kv(node_id id, worker_id worker, bool queue_release) {
    const node& x = nodes[id];
    kv_entry* e = held_kv(held[id], worker);
    const bool on_host = e->on_host;
    set_candidate(tier_set(*e), e->candidate, e->slot, id, false);
    (on_host ? stats.kv_host_bytes : stats.kv_bytes)[worker] -= e->bytes;
    --(on_host ? stats.kv_host_entries : stats.kv_entries)[worker];
    if (kv_kept(id))
      (on_host ? locked_host_bytes : locked_kv_bytes)[worker] -= e->bytes;
    if (queue_release)
      released.push_back(kv_release{worker, e->handle});
    if (e->kv_children != 0) {
      e->handle = no_kv;
      e->bytes = 0;
      sync_kv_flags(id);
    } else {
      remove_entry(id, e);
    }
    if (kv_entry* above = find_kv(held[x.parent], worker)) {
      --above->kv_children;
      if (!on_host)
        --above->device_children;
      if (above->handle == no_kv && above->kv_children == 0)
        remove_entry(x.parent, above);
      else
        refresh_kv(x.parent, *above);
    }
  }

  void evict_row() {
    if (row_candidates.empty())
      violation("no log-prob candidate left to evict");
    const node_id id = row_candidates.begin()->second;
    drop_row(id);
    ++stats.logprob_evictions;
    prune(id);
  }

  // Evicts the worker's first device candidate: to its host tier when that can make
  // room, else for good.
  void evict_kv(worker_id worker) {
    if (kv_candidates[worker].empty())
      violation("no KV candidate left to evict on worker " + std::to_string(worker));
    const node_id id = kv_candidates[worker].begin()->second;
    if (make_host_room(worker, held_kv(held[id], worker)->bytes)) {
      demote(id, worker);
      return;
    }
    // Under a window a candidate with children leaves a tombstone (Note [windowed KV]).
    while (!windowed() && held_kv(held[id], worker)->kv_children != 0)
      drop(host_descendant_candidate(id, worker), worker);
    drop(id, worker);
  }

  // A host candidate below `id` (which has host descendants only: Note [host tier]).
  node_id host_descendant_candidate(node_id id, worker_id worker) const {
    for (const auto& [key, candidate] : host_candidates[worker])
      for (node_id cur = nodes[candidate].parent; !is_root(cur); cur = nodes[cur].parent)
        if (cur == id)
          return candidate;
    violation(node_name(id) + ": KV children but no host candidate below it");
  }

  void drop(node_id id, worker_id worker) {
    drop_kv(id, worker, true);
    ++stats.kv_evictions;
    prune(id);
  }

  // Drops host candidates until `bytes` more fit the worker's host budget; false (and
  // nothing dropped) when even dropping all that is not kept would not be enough.
  bool make_host_room(worker_id worker, std::size_t bytes) {
    const auto budget = host_budgets[worker];
    if (budget == 0 || !fits_in(locked_host_bytes[worker], bytes, budget))
      return false;
    while (!fits_in(stats.kv_host_bytes[worker], bytes, budget)) {
      if (host_candidates[worker].empty())
        return false; // the rest builds on KV on the device that is kept
      drop(host_candidates[worker].begin()->second, worker);
    }
    return true;
  }

  // Moves an unkept device entry to the host tier, whose room is made.
  void demote(node_id id, worker_id worker) {
    kv_entry* e = held_kv(held[id], worker);
    set_candidate(kv_candidates[worker], e->candidate, e->slot, id, false);
    e->on_host = true;
    stats.kv_bytes[worker] -= e->bytes;
    --stats.kv_entries[worker];
    stats.kv_host_bytes[worker] += e->bytes;
    ++stats.kv_host_entries[worker];
    ++stats.kv_demotions;
    stats.kv_demoted_bytes += e->bytes;
    demoted.push_back(kv_release{worker, e->handle});
    refresh_kv(id, *e);
    if (kv_entry* above = find_kv(held[nodes[id].parent], worker)) {
      --above->device_children;
      refresh_kv(nodes[id].parent, *above);
    }
  }

  // Moves a kept host entry (a locked path's) back to the device when its budget can
  // make room; false (nothing moved) otherwise.
  bool promote(node_id id, worker_id worker) {
    kv_entry* e = held_kv(held[id], worker);
    const auto bytes = e->bytes;
    const auto budget = kv_budgets[worker];
    if (!fits_in(locked_kv_bytes[worker], bytes, budget))
      return false;
    // It leaves the host first, so the device's demotions may use its room.
    e->on_host = false;
    stats.kv_host_bytes[worker] -= bytes;
    --stats.kv_host_entries[worker];
    locked_host_bytes[worker] -= bytes;
    locked_kv_bytes[worker] += bytes;
    while (!fits_in(stats.kv_bytes[worker], bytes, budget))
      evict_kv(worker);
    stats.kv_bytes[worker] += bytes;
    ++stats.kv_entries[worker];
    stats.kv_peak_bytes[worker] =
        std::max(stats.kv_peak_bytes[worker], stats.kv_bytes[worker]);
    ++stats.kv_promotions;
    stats.kv_promoted_bytes += bytes;
    refresh_kv(id, *e);
    if (kv_entry* above = find_kv(held[nodes[id].parent], worker)) {
      ++above->device_children;
      refresh_kv(nodes[id].parent, *above);
    }
    return true;
  }

  std::uint32_t promote_kv(node_id node, worker_id worker) {
    if (!kv_kept(node))
      throw std::logic_error("token_trie::promote_kv: " + node_name(node) +
                             " is not locked");
    std::vector<node_id> path;
    for (node_id cur = node; !is_root(cur); cur = nodes[cur].parent)
      path.push_back(cur);
    for (auto it = path.rbegin(); it != path.rend(); ++it) {
      const kv_entry* e = held_kv(held[*it], worker);
      if (!e)
        break; // the path's KV ends here
      if (e->on_host && !promote(*it, worker))
        return nodes[*it].depth - 1;
    }
    return nodes[node].depth;
  }

  // Attaches at once when `fits()`. Otherwise locks the node's path (so no eviction
  // reaches the node or the prefix it builds on), checks with `feasible()` whether
  // evicting every unlocked holder would be enough, and only then evicts until
  // `fits()`. Checking first means a hopeless attach evicts nothing.
  // For KV under a window the lock is a full lock(), which keeps the KV the node
  // builds on even where its path is locked already.
  template <class Fits, class Feasible, class Evict, class Attach>
  bool attach_with_room(node_id id, bool kv, Fits fits, Feasible feasible, Evict evict,
                        Attach attach) {
    if (fits()) {
      attach();
      return true;
    }
    const bool own = kv && windowed();
    const bool temporary = own || nodes[id].locks == 0;
    if (temporary)
      own ? lock_own(id) : lock_path(id);
    const bool ok = feasible();
    if (ok) {
      while (!fits())
        evict();
      attach();
    } else {
      ++stats.refused_attaches;
    }
    if (temporary)
      own ? unlock_own(id) : unlock_path(id);
    return ok;
  }

  bool attach_logprobs(node_id id, row_ptr row) {
    const std::size_t need = row->bytes();
    const std::size_t max_rows = config.logprob_max_entries;
    const auto room = [&](std::size_t bytes_used, std::size_t rows_used) {
      return fits_in(bytes_used, need, config.logprob_budget_bytes) &&
             (max_rows == 0 || rows_used < max_rows);
    };
    return attach_with_room(
        id, false, [&] { return room(stats.logprob_bytes, stats.logprob_entries); },
        [&] { return room(locked_row_bytes, locked_rows); }, [&] { evict_row(); },
        [&] { add_row(id, std::move(row)); });
  }

  bool attach_kv(node_id id, worker_id worker, kv_handle handle, std::size_t bytes) {
    const std::size_t budget = kv_budgets[worker];
    return attach_with_room(
        id, true, [&] { return fits_in(stats.kv_bytes[worker], bytes, budget); },
        [&] { return fits_in(locked_kv_bytes[worker], bytes, budget); },
        [&] { evict_kv(worker); }, [&] { add_kv(id, worker, handle, bytes); });
  }

  // --- queries ---

  match_result match(node_id from, const token_id* tokens, std::size_t n,
                     std::int32_t priority, std::uint32_t kv_cap) {
    ++clock;
    match_result result;
    result.kv.resize(config.workers);
    if (from == no_node) {
      result.node = no_node;
      return result;
    }
    node_id cur = from;
    node_id kv_end = from; // the deepest node passed within kv_cap
    std::uint32_t depth = 0;
    for (; depth < n; ++depth) {
      const node_id child = find_child(cur, tokens[depth]);
      if (child == root_node)
        break;
      cur = child;
      if (!windowed())
        touch(cur, priority, true);
      if (depth + 1 <= kv_cap)
        kv_end = cur;
    }
    if (windowed())
      touch_window(cur, priority, true);
    result.node = cur;
    result.length = depth;
    if (depth == n)
      result.logprobs = held[cur].row;
    collect_kv(kv_end, result.kv);
    return result;
  }

  // kv[w] comes from the deepest node at or above `end` that ends a run of `need`
  // nodes holding KV on worker w, or of fewer that starts at depth 1: without a window
  // one node (KV is prefix-closed), with one W-1 (what a pass reads). So without a
  // window, walking up usually ends at `end` itself, where a walk down would read the
  // holding of every node; with one it reads about W-1 nodes.
  void collect_kv(node_id end, std::vector<kv_prefix>& kv) const {
    const std::uint32_t need = std::max(config.kv_window, 2u) - 1;
    std::vector<std::uint32_t> run(kv.size()); // [workers] nodes in the current run
    std::size_t missing = kv.size();
    for (node_id id = end; !is_root(id) && missing != 0; id = nodes[id].parent) {
      const node& x = nodes[id];
      if (!x.holds_kv && need == 1)
        continue; // no run to break
      for (worker_id w = 0; w < kv.size(); ++w) {
        if (kv[w].length != 0 && run[w] == 0)
          continue; // found
        const kv_entry* e = x.holds_kv ? held_kv(held[id], w) : nullptr;
        if (!e) {
          run[w] = 0;
          kv[w] = kv_prefix{};
          continue;
        }
        if (run[w]++ == 0)
          kv[w] = kv_prefix{x.depth, e->handle}; // the deepest node of the run
        if (run[w] >= need || x.depth == 1) {
          run[w] = 0;
          --missing;
        }
      }
    }
  }

  node_id insert(node_id from, const token_id* tokens, std::size_t n,
                 std::int32_t priority) {
    ++clock;
    node_id cur = from;
    for (std::size_t i = 0; i < n; ++i) {
      const node_id child = find_child(cur, tokens[i]);
      if (child == root_node) {
        cur = new_node(cur, tokens[i], priority);
      } else {
        cur = child;
        if (!windowed())
          touch(cur, priority, false);
      }
    }
    if (windowed())
      touch_window(cur, priority, false);
    return cur;
  }

  // --- bulk drops ---

  // Bulk drops visit nodes in id order, so a parent may lose its KV before its children
  // (its entry is a tombstone until they lose theirs) and may be visited while it
  // still has children (pruning its last child prunes it then). Pruning allocates
  // nothing, so ids not yet visited keep their meaning.
  void clear(std::string_view partitions, bool rows_too) {
    const auto chosen = in_partitions(partitions);
    for (node_id id = 1; id < nodes.size(); ++id) {
      if (!nodes[id].live || nodes[id].locks != 0 || !chosen[id])
        continue;
      holding& h = held[id];
      if (rows_too && h.row)
        drop_row(id);
      for (worker_id w = 0; w < config.workers; ++w)
        if (held_kv(h, w))
          drop_kv(id, w, true);
      prune(id);
    }
  }

  // [nodes] whether each node lies in a partition whose name starts with `prefix`.
  // Ids say nothing of depth (they are recycled), so each node's answer comes from its
  // parent's, found by walking up to the first node already decided: O(nodes) in all.
  std::vector<bool> in_partitions(std::string_view prefix) const {
    std::vector<bool> chosen(nodes.size(), prefix.empty());
    if (prefix.empty())
      return chosen;
    std::vector<bool> decided(nodes.size());
    decided[root_node] = true; // the shared partition's name "" starts with no prefix
    for (const auto& [name, root] : partition_roots) {
      decided[root] = true;
      chosen[root] = name.compare(0, prefix.size(), prefix) == 0;
    }
    std::vector<node_id> walk;
    for (node_id id = 0; id < nodes.size(); ++id) {
      if (!nodes[id].live)
        continue;
      for (node_id cur = id; !decided[cur]; cur = nodes[cur].parent)
        walk.push_back(cur);
      const bool answer = chosen[walk.empty() ? id : nodes[walk.back()].parent];
      for (node_id n : walk) {
        decided[n] = true;
        chosen[n] = answer;
      }
      walk.clear();
    }
    return chosen;
  }

  void forget_worker(worker_id worker) {
    for (node_id id = 1; id < nodes.size(); ++id) {
      if (nodes[id].live && held_kv(held[id], worker)) {
        drop_kv(id, worker, false);
        prune(id);
      }
    }
    // Nobody is left to free or move what was queued for the worker either.
    for (auto* queue : {&released, &demoted})
      queue->erase(
          std::remove_if(queue->begin(), queue->end(),
                         [&](const kv_release& r) { return r.worker == worker; }),
          queue->end());
  }

  void check_invariants() const;
};

// Recomputes every derived quantity from the nodes alone and compares.
void token_trie::impl::check_invariants() const {
  const std::size_t workers = config.workers;
  const node& root = nodes[root_node];
  if (!root.live || root.depth != 0)
    violation("the root must be live and at depth 0");
  if (partition_roots.size() != partition_names.size() ||
      stats.partitions != partition_roots.size())
    violation("partition names and roots disagree");
  for (const auto& [name, id] : partition_roots) {
    const auto it = partition_names.find(id);
    if (name.empty() || !exists(id) || nodes[id].depth != 0 ||
        nodes[id].parent != root_node || it == partition_names.end() ||
        it->second != name)
      violation("partition '" + name +
                "' has no root of its own at depth 0 below the root");
  }
  if (held.size() != nodes.size())
    violation("holdings and nodes differ in number");

  std::vector<std::uint32_t> child_count(nodes.size()), row_child_count(nodes.size());
  std::vector<std::uint32_t> in_use_children(nodes.size());
  std::vector<std::uint32_t> kv_child_count(nodes.size() * workers);
  std::vector<std::uint32_t> device_child_count(nodes.size() * workers);
  std::vector<std::uint64_t> host_entries(workers), host_bytes(workers),
      locked_host(workers);
  std::vector<std::size_t> host_members(workers);
  std::uint64_t live = 0, locked_nodes = 0, rows = 0, row_bytes = 0, locked_bytes = 0,
                locked_row_count = 0;
  std::vector<std::uint64_t> kv_entries(workers), kv_bytes(workers), locked_kv(workers);
  std::size_t row_members = 0;
  std::vector<std::size_t> kv_members(workers);
  std::vector<std::uint64_t> created;

  for (node_id id = 0; id < nodes.size(); ++id) {
    const node& x = nodes[id];
    const holding& h = held[id];
    if (!x.live) {
      if (h.row || !h.kv.empty())
        violation(node_name(id) + ": removed but still holds something");
      continue;
    }
    ++live;
    locked_nodes += x.locks != 0 ? 1 : 0;
    if (x.depth == 0 && (h.row || !h.kv.empty()))
      violation(node_name(id) + ": a root holds a row or KV");
    if (x.depth == 0 && id != root_node && partition_names.count(id) == 0)
      violation(node_name(id) + ": at depth 0 but no partition's root");
    // A candidate's kept element must be the one keyed by its statistics now; the set
    // sizes below rule out elements of nodes that are no candidates.
    const auto in_set = [&](const candidate_set& set, candidate_set::iterator slot) {
      const auto found = set.find({key_of(x.stats), id});
      return found != set.end() && found == slot;
    };
    created.push_back(x.stats.created);
    if (id != root_node) {
      if (!exists(x.parent))
        violation(node_name(id) + ": parent is not live");
      const node& p = nodes[x.parent];
      if (x.depth != 0 && x.depth != p.depth + 1)
        violation(node_name(id) + ": depth is not its parent's plus one");
      const node_id* child = children.find(child_key(x.parent, x.token));
      if (x.depth != 0 && (!child || *child != id))
        violation(node_name(id) + ": child map does not lead to it");
      if (x.locks != 0 && p.locks == 0)
        violation(node_name(id) + ": in use under a parent that is not");
      in_use_children[x.parent] += x.locks != 0 ? 1 : 0;
      ++child_count[x.parent];
      row_child_count[x.parent] += h.row ? 1 : 0;
    }
    if (h.row_bytes != (h.row ? h.row->bytes() : 0))
      violation(node_name(id) + ": kept row size differs from its row's");
    if (h.row) {
      ++rows;
      row_bytes += h.row->bytes();
      if (x.locks != 0) {
        locked_bytes += h.row->bytes();
        ++locked_row_count;
      }
    }
    const bool row_rule = h.row && x.locks == 0 && x.row_children == 0;
    if (x.row_candidate != row_rule)
      violation(node_name(id) + ": log-prob candidate flag disagrees with the rule");
    if (x.row_candidate && !in_set(row_candidates, h.row_slot))
      violation(node_name(id) + ": flagged log-prob candidate missing from its set");
    row_members += x.row_candidate ? 1 : 0;

    if (x.holds_kv != !h.kv.empty())
      violation(node_name(id) + ": holds_kv disagrees with its KV entries");
    bool any_kv_candidate = false;
    for (const kv_entry& e : h.kv) {
      const auto same_worker = [&](const kv_entry& f) { return f.worker == e.worker; };
      if (e.worker >= workers ||
          std::count_if(h.kv.begin(), h.kv.end(), same_worker) != 1)
        violation(node_name(id) + ": KV entry of an unknown or repeated worker");
      const bool tombstone = e.handle == no_kv;
      if (tombstone && (!windowed() || e.kv_children == 0 || e.bytes != 0))
        violation(node_name(id) +
                  ": KV tombstone without a window, children or zero bytes");
      // Under a window the parent's KV may be gone, but its tombstone counts this.
      const kv_entry* above = find_kv(held[x.parent], e.worker);
      if (!tombstone && !is_root(x.parent) &&
          !(above && (windowed() || above->handle != no_kv)))
        violation(node_name(id) + ": KV without its prefix's KV (not prefix-closed)");
      if (!tombstone && !e.on_host && above && above->on_host)
        violation(node_name(id) + ": device KV below host KV");
      if (e.on_host && (tombstone || windowed() || host_budgets[e.worker] == 0))
        violation(node_name(id) + ": host-tier KV that is a tombstone, windowed or "
                                  "of a worker without a host tier");
      if (!tombstone) {
        ++kv_child_count[x.parent * workers + e.worker];
        device_child_count[x.parent * workers + e.worker] += e.on_host ? 0 : 1;
        ++(e.on_host ? host_entries : kv_entries)[e.worker];
        (e.on_host ? host_bytes : kv_bytes)[e.worker] += e.bytes;
        if (kv_kept(id))
          (e.on_host ? locked_host : locked_kv)[e.worker] += e.bytes;
      }
      if (e.candidate != kv_candidate_rule(id, e))
        violation(node_name(id) + ": KV candidate flag disagrees with the rule");
      const auto& tier = e.on_host ? host_candidates[e.worker] : kv_candidates[e.worker];
      if (e.candidate && !in_set(tier, e.slot))
        violation(node_name(id) + ": flagged KV candidate missing from its set");
      (e.on_host ? host_members : kv_members)[e.worker] += e.candidate ? 1 : 0;
      any_kv_candidate = any_kv_candidate || e.candidate;
    }
    if (x.kv_candidate != any_kv_candidate)
      violation(node_name(id) + ": kv_candidate disagrees with its KV entries");
  }

  // Each lock counts in window_locks of its node and W-1 ancestors (none without a
  // window).
  std::vector<std::uint32_t> window_locks(nodes.size());
  for (node_id id = 0; id < nodes.size(); ++id)
    if (nodes[id].live)
      for_window(id, [&](node_id n) { window_locks[n] += held[id].own_locks; });

  for (node_id id = 0; id < nodes.size(); ++id) {
    const node& x = nodes[id];
    if (!x.live)
      continue;
    if (x.children != child_count[id])
      violation(node_name(id) + ": child count is wrong");
    if (x.row_children != row_child_count[id])
      violation(node_name(id) + ": count of children holding log-probs is wrong");
    if (x.locks != held[id].own_locks + in_use_children[id])
      violation(node_name(id) + ": lock count is not its own locks plus children in use");
    if (held[id].window_locks != window_locks[id])
      violation(node_name(id) + ": window lock count disagrees with the locks below it");
    if (is_root(id))
      continue;
    for (worker_id w = 0; w < workers; ++w) {
      const kv_entry* e = find_kv(held[id], w);
      if ((e ? e->kv_children : 0) != kv_child_count[id * workers + w])
        violation(node_name(id) + ": count of children holding KV is wrong");
      if ((e ? e->device_children : 0) != device_child_count[id * workers + w])
        violation(node_name(id) + ": count of children holding device KV is wrong");
    }
  }

  std::sort(created.begin(), created.end());
  if (std::adjacent_find(created.begin(), created.end()) != created.end())
    violation("two nodes share a creation time");
  if (children.size() != live - 1 - partition_roots.size())
    violation("child map has entries for dead nodes");
  std::vector<bool> freed(nodes.size());
  for (node_id id : free_ids) {
    if (id >= nodes.size() || nodes[id].live || freed[id])
      violation("free list holds a live or repeated " + node_name(id));
    freed[id] = true;
  }
  if (free_ids.size() != nodes.size() - live)
    violation("a dead node is missing from the free list");
  if (row_candidates.size() != row_members)
    violation("log-prob candidate set holds non-candidates");
  for (worker_id w = 0; w < workers; ++w)
    if (kv_candidates[w].size() != kv_members[w] ||
        host_candidates[w].size() != host_members[w])
      violation("a KV candidate set of worker " + std::to_string(w) +
                " holds non-candidates");

  if (stats.nodes != live || stats.locked_nodes != locked_nodes ||
      stats.logprob_entries != rows || stats.logprob_bytes != row_bytes ||
      stats.kv_entries != kv_entries || stats.kv_bytes != kv_bytes ||
      stats.kv_host_entries != host_entries || stats.kv_host_bytes != host_bytes)
    violation("statistics disagree with the nodes");
  if (locked_row_bytes != locked_bytes || locked_rows != locked_row_count ||
      !std::equal(locked_kv.begin(), locked_kv.end(), locked_kv_bytes.begin()) ||
      !std::equal(locked_host.begin(), locked_host.end(), locked_host_bytes.begin()))
    violation("locked byte totals disagree with the nodes");

  if (row_bytes > config.logprob_budget_bytes)
    violation("log-prob bytes over budget");
  if (config.logprob_max_entries != 0 && rows > config.logprob_max_entries)
    violation("log-prob entries over the entry limit");
  if (kv_budgets.size() != workers || kv_candidates.size() != workers ||
      host_budgets.size() != workers || host_candidates.size() != workers ||
      locked_host_bytes.size() != workers || stats.kv_host_bytes.size() != workers ||
      stats.kv_bytes.size() != workers || stats.kv_peak_bytes.size() != workers)
    violation("per-worker tables disagree with the number of workers");
  for (worker_id w = 0; w < workers; ++w)
    if (kv_bytes[w] > kv_budgets[w] || host_bytes[w] > host_budgets[w])
      violation("KV bytes of worker " + std::to_string(w) + " over a budget");
  for (worker_id w = 0; w < workers; ++w)
    if (stats.kv_peak_bytes[w] < kv_bytes[w])
      violation("KV peak of worker " + std::to_string(w) + " below its KV bytes");
}

token_trie::token_trie(trie_config config) : impl_(std::make_unique<impl>(config)) {}

token_trie::~token_trie() = default;

const trie_config& token_trie::config() const {
  return impl_->config;
}

match_result token_trie::match(const token_id* tokens, std::size_t n,
                               std::int32_t priority, std::uint32_t kv_cap) {
  return impl_->match(root_node, tokens, n, priority, kv_cap);
}

match_result token_trie::match(std::string_view partition, const token_id* tokens,
                               std::size_t n, std::int32_t priority,
                               std::uint32_t kv_cap) {
  return impl_->match(impl_->partition_root(partition), tokens, n, priority, kv_cap);
}

std::vector<kv_prefix> token_trie::kv_prefixes(node_id node) const {
  impl_->checked(node);
  std::vector<kv_prefix> kv(impl_->config.workers);
  impl_->collect_kv(node, kv);
  return kv;
}

node_id token_trie::insert(const token_id* tokens, std::size_t n, std::int32_t priority) {
  if (n == 0)
    throw std::invalid_argument("token_trie::insert: empty sequence");
  return impl_->insert(root_node, tokens, n, priority);
}

node_id token_trie::insert(std::string_view partition, const token_id* tokens,
                           std::size_t n, std::int32_t priority) {
  if (n == 0)
    throw std::invalid_argument("token_trie::insert: empty sequence");
  return impl_->insert(impl_->make_partition_root(partition), tokens, n, priority);
}

node_id token_trie::extend(node_id node, const token_id* tokens, std::size_t n,
                           std::int32_t priority) {
  impl_->checked(node);
  return impl_->insert(node, tokens, n, priority);
}

std::vector<node_id> token_trie::path(node_id node) const {
  std::vector<node_id> result(impl_->checked(node).depth);
  for (node_id cur = node; !impl_->is_root(cur); cur = impl_->nodes[cur].parent)
    result[impl_->nodes[cur].depth - 1] = cur;
  return result;
}

node_id token_trie::ancestor(node_id node, std::uint32_t depth) const {
  if (impl_->checked(node).depth < depth)
    throw std::out_of_range("token_trie::ancestor: " + node_name(node) + " is at depth " +
                            std::to_string(impl_->nodes[node].depth) + ", above " +
                            std::to_string(depth));
  while (impl_->nodes[node].depth > depth)
    node = impl_->nodes[node].parent;
  return node;
}

void token_trie::lock(node_id node) {
  impl_->checked(node);
  impl_->lock_own(node);
}

void token_trie::unlock(node_id node) {
  impl_->checked(node);
  if (impl_->held[node].own_locks == 0)
    throw std::logic_error("token_trie::unlock: " + node_name(node) + " is not locked");
  impl_->unlock_own(node);
}

bool token_trie::attach_logprobs(node_id node, row_ptr row) {
  impl_->checked(node);
  if (impl_->is_root(node) || !row)
    throw std::invalid_argument("token_trie::attach_logprobs: root or null row");
  if (impl_->held[node].row)
    return true;
  return impl_->attach_logprobs(node, std::move(row));
}

bool token_trie::attach_kv(node_id node, worker_id worker, kv_handle handle,
                           std::size_t bytes) {
  const auto& x = impl_->checked(node);
  impl_->check_worker(worker);
  if (impl_->is_root(node) || handle == no_kv)
    throw std::invalid_argument("token_trie::attach_kv: root or no_kv handle");
  const bool first = impl_->is_root(x.parent);
  const kv_entry* above = first ? nullptr : held_kv(impl_->held[x.parent], worker);
  if (find_kv(impl_->held[node], worker) || (!first && (!above || above->on_host)))
    return false;
  return impl_->attach_kv(node, worker, handle, bytes);
}

std::uint32_t token_trie::promote_kv(node_id node, worker_id worker) {
  impl_->checked(node);
  impl_->check_worker(worker);
  return impl_->promote_kv(node, worker);
}

row_ptr token_trie::logprobs(node_id node) const {
  impl_->checked(node);
  return impl_->held[node].row;
}

kv_handle token_trie::kv(node_id node, worker_id worker) const {
  impl_->checked(node);
  impl_->check_worker(worker);
  const kv_entry* e = find_kv(impl_->held[node], worker);
  return e ? e->handle : no_kv;
}

bool token_trie::kv_on_host(node_id node, worker_id worker) const {
  impl_->checked(node);
  impl_->check_worker(worker);
  const kv_entry* e = held_kv(impl_->held[node], worker);
  return e && e->on_host;
}

void token_trie::clear(std::string_view partitions) {
  impl_->clear(partitions, true);
}

void token_trie::clear_kv(std::string_view partitions) {
  impl_->clear(partitions, false);
}

worker_id token_trie::add_worker(std::size_t kv_budget_bytes,
                                 std::size_t kv_host_budget_bytes) {
  auto& i = *impl_;
  i.check_host_tier(kv_host_budget_bytes);
  const auto id = static_cast<worker_id>(i.config.workers);
  ++i.config.workers;
  i.kv_candidates.emplace_back();
  i.host_candidates.emplace_back();
  i.locked_kv_bytes.push_back(0);
  i.locked_host_bytes.push_back(0);
  i.kv_budgets.push_back(kv_budget_bytes);
  i.host_budgets.push_back(kv_host_budget_bytes);
  i.stats.kv_entries.push_back(0);
  i.stats.kv_bytes.push_back(0);
  i.stats.kv_peak_bytes.push_back(0);
  i.stats.kv_host_entries.push_back(0);
  i.stats.kv_host_bytes.push_back(0);
  return id;
}

void token_trie::set_kv_budget(worker_id worker, std::size_t kv_budget_bytes,
                               std::size_t kv_host_budget_bytes) {
  impl_->check_worker(worker);
  impl_->check_host_tier(kv_host_budget_bytes);
  if (impl_->stats.kv_entries[worker] != 0 || impl_->stats.kv_host_entries[worker] != 0)
    throw std::logic_error("token_trie::set_kv_budget: worker " + std::to_string(worker) +
                           " holds KV (forget it first)");
  impl_->kv_budgets[worker] = kv_budget_bytes;
  impl_->host_budgets[worker] = kv_host_budget_bytes;
}

std::size_t token_trie::kv_host_budget(worker_id worker) const {
  impl_->check_worker(worker);
  return impl_->host_budgets[worker];
}

std::size_t token_trie::kv_budget(worker_id worker) const {
  impl_->check_worker(worker);
  return impl_->kv_budgets[worker];
}

std::uint32_t token_trie::workers() const {
  return impl_->config.workers;
}

void token_trie::forget_worker(worker_id worker) {
  impl_->check_worker(worker);
  impl_->forget_worker(worker);
}

std::vector<kv_release> token_trie::take_released() {
  std::vector<kv_release> taken;
  taken.swap(impl_->released);
  return taken;
}

std::vector<kv_release> token_trie::take_demoted() {
  std::vector<kv_release> taken;
  taken.swap(impl_->demoted);
  return taken;
}

const trie_stats& token_trie::stats() const {
  return impl_->stats;
}

std::uint32_t token_trie::lock_count(node_id node) const {
  return impl_->checked(node).locks;
}

node_id token_trie::parent(node_id node) const {
  return impl_->checked(node).parent;
}

std::uint32_t token_trie::depth(node_id node) const {
  return impl_->checked(node).depth;
}

token_id token_trie::token(node_id node) const {
  return impl_->checked(node).token;
}

std::string_view token_trie::partition(node_id node) const {
  impl_->checked(node);
  while (!impl_->is_root(node))
    node = impl_->nodes[node].parent;
  if (node == root_node)
    return {};
  return impl_->partition_names.at(node);
}

bool token_trie::exists(node_id node) const {
  return impl_->exists(node);
}

void token_trie::check_invariants() const {
  impl_->check_invariants();
}

} // namespace canopy::cache
