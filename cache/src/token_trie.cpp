#include <canopy/cache/token_trie.hpp>

#include "kv_ledger.hpp"
#include "node_tree.hpp"
#include "row_ledger.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace canopy::cache {

using namespace detail;

// The trie is three parts over one table of nodes: the tree (node_tree: links,
// partitions, ids), the stored rows (row_ledger) and each worker's KV (kv_ledger). What
// spans them lives here: walks that touch statistics (match, insert), locks (which
// change what both ledgers may evict), attaching with room made, and bulk drops.
struct token_trie::impl {
  node_tree tree;
  row_ledger rows{tree};
  kv_ledger kv{tree};

  explicit impl(const trie_config& c) : tree(c) {}

  void refresh_all(node_id id) {
    rows.refresh(id);
    kv.refresh_node(id);
  }

  // Only candidates sit in sets, so only they pay for more than the statistics.
  void touch(node_id id, std::int32_t priority, bool hit) {
    node& x = tree.nodes[id];
    node_stats next = x.stats;
    next.last_access = tree.clock;
    next.priority = std::max(next.priority, priority);
    next.hits += hit ? 1 : 0;
    if (x.row_candidate || x.kv_candidate) {
      const eviction_key to = tree.key_of(next);
      if (to != tree.key_of(x.stats)) { // FIFO keys never move
        rows.reposition(id, to);
        kv.reposition(id, to);
      }
    }
    x.stats = next;
  }

  // Under a window a walk uses only the nodes its end's window covers (Note
  // [windowed KV] in kv_ledger.cpp): those W are touched, the rest of the path keeps
  // its statistics.
  void touch_window(node_id end, std::int32_t priority, bool hit) {
    tree.for_window(end, [&](node_id n) { touch(n, priority, hit); });
  }

  // --- locks ---

  // Note [settled locks]
  // A lock changes the counts along its path at once; what the ledgers derive from
  // them (which nodes are eviction candidates, the bytes locks keep) follows when
  // settle_locks() runs, before anything reads it: evictions, room checks, promotions,
  // budget changes, and the clears and a worker forgotten, which drop entries through
  // the ledgers (rare, so settling first keeps them simple). Decoding extends one
  // sequence a token a query: each query's lock climbs the whole path that the previous
  // query's unlock has just descended. Settled together, a node whose state came back
  // costs one comparison instead of the ledgers' updates, which were most of a long
  // sequence's cost per query
  // (`canopy bench --backend mock --workload decode --steps 6000 --prompt-length 4
  // --context_length 8000`). A node removed meanwhile held nothing, so the ledgers
  // count nothing of it whatever its state. With room to spare nothing reads the
  // ledgers for long, so past a trie's worth of queued changes locks settle anyway.
  void settle_locks() {
    for (const node_id id : tree.lock_changes) {
      holding& h = tree.held[id];
      const bool locked = tree.nodes[id].locks != 0;
      if (h.ledger_locked == locked) // came back, settled already, or removed
        continue;
      h.ledger_locked = locked;
      rows.account_lock(id, locked);
      kv.account_lock(id, locked);
      refresh_all(id);
    }
    tree.lock_changes.clear();
  }

  // A count going 0 -> 1 makes the node in use, which its parent counts as one more
  // child in use; a count already non-zero means the ancestors count it already.
  void lock_path(node_id id) {
    for (node_id cur = id; tree.nodes[cur].locks++ == 0; cur = tree.nodes[cur].parent) {
      ++tree.stats.locked_nodes;
      tree.lock_changes.push_back(cur);
      if (cur == root_node)
        return;
    }
  }

  void unlock_path(node_id id) {
    for (node_id cur = id; --tree.nodes[cur].locks == 0; cur = tree.nodes[cur].parent) {
      --tree.stats.locked_nodes;
      tree.lock_changes.push_back(cur);
      if (cur == root_node)
        break;
    }
    tree.prune(id);
  }

  // The queue of unsettled changes stays within a trie's worth (plus slack for a
  // small trie), however long nothing reads the ledgers (Note [settled locks]).
  void bound_lock_changes() {
    if (tree.lock_changes.size() > tree.nodes.size() + 4096)
      settle_locks();
  }

  // What lock() and unlock() do: the path's lock counts, and under a window the KV
  // above the node.
  void lock_own(node_id id) {
    bound_lock_changes();
    ++tree.held[id].own_locks;
    lock_path(id);
    if (tree.windowed())
      kv.protect_window(id, true);
  }

  void unlock_own(node_id id) {
    bound_lock_changes();
    --tree.held[id].own_locks;
    if (tree.windowed())
      kv.protect_window(id, false);
    unlock_path(id);
  }

  // --- attaching ---

  // Attaches at once when `fits()`. Otherwise locks the node's path (so no eviction
  // reaches the node or the prefix it builds on), checks with `feasible()` whether
  // evicting every unlocked holder would be enough, and only then evicts until
  // `fits()`. Checking first means a hopeless attach evicts nothing.
  // For KV under a window the lock is a full lock(), which keeps the KV the node
  // builds on even where its path is locked already.
  template <class Fits, class Feasible, class Evict, class Attach>
  bool attach_with_room(node_id id, bool for_kv, Fits fits, Feasible feasible,
                        Evict evict, Attach attach) {
    if (fits()) {
      attach();
      return true;
    }
    const bool own = for_kv && tree.windowed();
    const bool temporary = own || tree.nodes[id].locks == 0;
    if (temporary)
      own ? lock_own(id) : lock_path(id);
    settle_locks();
    const bool ok = feasible();
    if (ok) {
      while (!fits())
        evict();
      attach();
    } else {
      ++tree.stats.refused_attaches;
    }
    if (temporary)
      own ? unlock_own(id) : unlock_path(id);
    return ok;
  }

  bool attach_logprobs(node_id id, row_ptr row) {
    const std::size_t need = row->bytes();
    return attach_with_room(
        id, false, [&] { return rows.fits(need); }, [&] { return rows.feasible(need); },
        [&] { rows.evict(); }, [&] { rows.add(id, std::move(row)); });
  }

  bool attach_extra(node_id id, row_extra_ptr extra) {
    const std::size_t need = extra->bytes();
    return attach_with_room(
        id, false, [&] { return rows.fits(need, true); },
        [&] { return rows.feasible(need, true); }, [&] { rows.evict(); },
        [&] { rows.add_extra(id, std::move(extra)); });
  }

  bool attach_kv(node_id id, worker_id worker, kv_handle handle, std::size_t bytes) {
    return attach_with_room(
        id, true, [&] { return kv.fits(worker, bytes); },
        [&] { return kv.feasible(worker, bytes); }, [&] { kv.evict(worker); },
        [&] { kv.add(id, worker, handle, bytes); });
  }

  // --- walks ---

  match_result match(node_id from, const token_id* tokens, std::size_t n,
                     std::int32_t priority, std::uint32_t kv_cap) {
    ++tree.clock;
    match_result result;
    result.kv.resize(tree.config.workers);
    if (from == no_node) {
      result.node = no_node;
      return result;
    }
    const bool windowed = tree.windowed();
    node_id cur = from;
    node_id kv_end = from; // the deepest node passed within kv_cap
    std::uint32_t depth = 0;
    for (; depth < n; ++depth) {
      const node_id child = tree.find_child(cur, tokens[depth]);
      if (child == root_node)
        break;
      cur = child;
      if (!windowed)
        touch(cur, priority, true);
      if (depth + 1 <= kv_cap)
        kv_end = cur;
    }
    if (windowed)
      touch_window(cur, priority, true);
    result.node = cur;
    result.length = depth;
    if (depth == n) {
      result.logprobs = tree.held[cur].row;
      result.extra = tree.held[cur].extra;
    }
    kv.collect(kv_end, result.kv);
    return result;
  }

  node_id insert(node_id from, const token_id* tokens, std::size_t n,
                 std::int32_t priority) {
    ++tree.clock;
    const bool windowed = tree.windowed();
    node_id cur = from;
    for (std::size_t i = 0; i < n; ++i) {
      const node_id child = tree.find_child(cur, tokens[i]);
      if (child == root_node) {
        cur = tree.new_node(cur, tokens[i], priority);
      } else {
        cur = child;
        if (!windowed)
          touch(cur, priority, false);
      }
    }
    if (windowed)
      touch_window(cur, priority, false);
    return cur;
  }

  // Bulk drops visit nodes in id order, so a parent may lose its KV before its children
  // (its entry is a tombstone until they lose theirs) and may be visited while it
  // still has children (pruning its last child prunes it then). Pruning allocates
  // nothing, so ids not yet visited keep their meaning.
  void clear(const partition_filter& pick, bool rows_too) {
    const auto chosen = tree.in_partitions(pick);
    for (node_id id = 1; id < tree.nodes.size(); ++id) {
      if (!tree.nodes[id].live || tree.nodes[id].locks != 0 || !chosen[id])
        continue;
      const holding& h = tree.held[id];
      if (rows_too && h.row)
        rows.drop(id);
      for (worker_id w = 0; w < kv.workers(); ++w)
        if (held_kv(h, w))
          kv.drop(id, w, true);
      tree.prune(id);
    }
  }
};

token_trie::token_trie(trie_config config) : impl_(std::make_unique<impl>(config)) {}

token_trie::~token_trie() = default;

const trie_config& token_trie::config() const {
  return impl_->tree.config;
}

match_result token_trie::match(const token_id* tokens, std::size_t n,
                               std::int32_t priority, std::uint32_t kv_cap) {
  return impl_->match(root_node, tokens, n, priority, kv_cap);
}

match_result token_trie::match(std::string_view partition, const token_id* tokens,
                               std::size_t n, std::int32_t priority,
                               std::uint32_t kv_cap) {
  return impl_->match(impl_->tree.partition_root(partition), tokens, n, priority, kv_cap);
}

node_id token_trie::find(std::string_view partition, const token_id* tokens,
                         std::size_t n) {
  auto& tree = impl_->tree;
  node_id cur = tree.partition_root(partition);
  for (std::size_t i = 0; i < n && cur != no_node; ++i) {
    const node_id child = tree.find_child(cur, tokens[i]);
    cur = child == root_node ? no_node : child;
  }
  return cur;
}

trie_view token_trie::view(std::string_view partition, const token_id* prefix,
                           std::size_t n, const trie_view_limits& limits) {
  auto& tree = impl_->tree;
  trie_view out;
  const node_id top = find(partition, prefix, n);
  if (top == no_node || limits.max_nodes == 0)
    return out;
  // Nodes know their parent but not their children: one pass over all nodes finds
  // those within the depth limit below `top`.
  const auto top_depth = tree.nodes[top].depth;
  std::unordered_map<node_id, std::vector<node_id>> below;
  for (node_id id = 0; id < tree.nodes.size(); ++id) {
    const auto& x = tree.nodes[id];
    if (x.live && x.depth > top_depth && x.depth - top_depth <= limits.depth &&
        tree.ancestor(id, top_depth) == top)
      below[x.parent].push_back(id);
  }
  auto describe = [&](node_id id, std::int32_t parent) {
    const auto& x = tree.nodes[id];
    const auto& h = tree.held[id];
    trie_view_node v;
    v.token = x.depth == 0 ? 0 : x.token;
    v.depth = x.depth;
    v.parent = parent;
    v.row_bytes = h.row ? h.row_bytes : 0;
    for (const auto& e : h.kv)
      if (e.handle != no_kv)
        v.kv.push_back({e.worker, e.on_host, e.bytes});
    v.hits = x.stats.hits;
    v.locks = x.locks;
    v.children = x.children;
    return v;
  };
  // Breadth-first, so that what max_nodes leaves out is the deepest.
  std::vector<std::pair<node_id, std::int32_t>> queue{{top, -1}};
  for (std::size_t i = 0; i < queue.size(); ++i) {
    out.nodes.push_back(describe(queue[i].first, queue[i].second));
    const auto it = below.find(queue[i].first);
    if (it == below.end())
      continue;
    auto& children = it->second;
    std::sort(children.begin(), children.end(), [&](node_id a, node_id b) {
      const auto &x = tree.nodes[a], &y = tree.nodes[b];
      return x.stats.hits != y.stats.hits ? x.stats.hits > y.stats.hits
                                          : x.token < y.token;
    });
    if (children.size() > limits.max_children) {
      children.resize(limits.max_children);
      out.truncated = true;
    }
    for (const auto child : children) {
      if (queue.size() >= limits.max_nodes) {
        out.truncated = true;
        break;
      }
      queue.emplace_back(child, static_cast<std::int32_t>(i));
    }
  }
  return out;
}

std::vector<kv_prefix> token_trie::kv_prefixes(node_id node) const {
  impl_->tree.checked(node);
  std::vector<kv_prefix> kv(workers());
  impl_->kv.collect(node, kv);
  return kv;
}

bool token_trie::kv_continues(node_id node) const {
  impl_->tree.checked(node);
  return impl_->kv.reaches(node);
}

std::vector<kv_prefix> token_trie::promoted_kv_prefixes(node_id node) {
  auto kv = kv_prefixes(node);
  for (worker_id w = 0; w < kv.size(); ++w) {
    if (kv[w].length == 0 || impl_->kv.host_budget(w) == 0)
      continue;
    impl_->settle_locks(); // a promotion reads the ledgers; without a host tier, none
    const node_id end = impl_->tree.ancestor(node, kv[w].length);
    const std::uint32_t depth = impl_->kv.promote_path(end, w);
    if (depth != kv[w].length) // the prefix ends above the KV left on the host
      kv[w] = depth == 0
                  ? kv_prefix{}
                  : kv_prefix{depth, this->kv(impl_->tree.ancestor(end, depth), w)};
  }
  return kv;
}

node_id token_trie::insert(const token_id* tokens, std::size_t n, std::int32_t priority) {
  return insert({}, tokens, n, priority);
}

node_id token_trie::insert(std::string_view partition, const token_id* tokens,
                           std::size_t n, std::int32_t priority) {
  if (n == 0)
    throw std::invalid_argument("token_trie::insert: empty sequence");
  return impl_->insert(impl_->tree.make_partition_root(partition), tokens, n, priority);
}

node_id token_trie::extend(node_id node, const token_id* tokens, std::size_t n,
                           std::int32_t priority) {
  impl_->tree.checked(node);
  return impl_->insert(node, tokens, n, priority);
}

std::vector<node_id> token_trie::path(node_id node, std::uint32_t from_depth) const {
  const auto& tree = impl_->tree;
  const std::uint32_t depth = tree.checked(node).depth;
  if (from_depth > depth)
    throw std::out_of_range("token_trie::path: " + node_name(node) + " is at depth " +
                            std::to_string(depth) + ", above " +
                            std::to_string(from_depth));
  std::vector<node_id> result(depth - from_depth);
  for (node_id cur = node; tree.nodes[cur].depth > from_depth;
       cur = tree.nodes[cur].parent)
    result[tree.nodes[cur].depth - from_depth - 1] = cur;
  return result;
}

node_id token_trie::ancestor(node_id node, std::uint32_t depth) const {
  const auto& tree = impl_->tree;
  if (tree.checked(node).depth < depth)
    throw std::out_of_range("token_trie::ancestor: " + node_name(node) + " is at depth " +
                            std::to_string(tree.nodes[node].depth) + ", above " +
                            std::to_string(depth));
  return tree.ancestor(node, depth);
}

void token_trie::lock(node_id node) {
  impl_->tree.checked(node);
  impl_->lock_own(node);
}

void token_trie::unlock(node_id node) {
  impl_->tree.checked(node);
  if (impl_->tree.held[node].own_locks == 0)
    throw std::logic_error("token_trie::unlock: " + node_name(node) + " is not locked");
  impl_->unlock_own(node);
}

bool token_trie::attach_logprobs(node_id node, row_ptr row) {
  impl_->tree.checked(node);
  if (impl_->tree.is_root(node) || !row)
    throw std::invalid_argument("token_trie::attach_logprobs: root or null row");
  if (impl_->tree.held[node].row)
    return true;
  return impl_->attach_logprobs(node, std::move(row));
}

bool token_trie::attach_extra(node_id node, const row_ptr& row, row_extra_ptr extra) {
  impl_->tree.checked(node);
  if (!row || !extra)
    throw std::invalid_argument("token_trie::attach_extra: null row or extra");
  const holding& h = impl_->tree.held[node];
  if (h.row != row || h.extra)
    return false;
  return impl_->attach_extra(node, std::move(extra));
}

bool token_trie::attach_kv(node_id node, worker_id worker, kv_handle handle,
                           std::size_t bytes) {
  impl_->tree.checked(node);
  impl_->kv.check_worker(worker);
  if (impl_->tree.is_root(node) || handle == no_kv)
    throw std::invalid_argument("token_trie::attach_kv: root or no_kv handle");
  if (!impl_->kv.attachable(node, worker))
    return false;
  return impl_->attach_kv(node, worker, handle, bytes);
}

std::uint32_t token_trie::promote_kv(node_id node, worker_id worker) {
  impl_->tree.checked(node);
  impl_->kv.check_worker(worker);
  impl_->settle_locks();
  return impl_->kv.promote_path(node, worker);
}

row_ptr token_trie::logprobs(node_id node) const {
  impl_->tree.checked(node);
  return impl_->tree.held[node].row;
}

row_extra_ptr token_trie::extra(node_id node) const {
  impl_->tree.checked(node);
  return impl_->tree.held[node].extra;
}

kv_handle token_trie::kv(node_id node, worker_id worker) const {
  impl_->tree.checked(node);
  impl_->kv.check_worker(worker);
  const kv_entry* e = find_kv(impl_->tree.held[node], worker);
  return e ? e->handle : no_kv;
}

bool token_trie::kv_on_host(node_id node, worker_id worker) const {
  impl_->tree.checked(node);
  impl_->kv.check_worker(worker);
  const kv_entry* e = held_kv(impl_->tree.held[node], worker);
  return e && e->on_host;
}

namespace {

partition_filter starting_with(std::string_view prefix) {
  return [prefix](std::string_view name) {
    return name.compare(0, prefix.size(), prefix) == 0;
  };
}

} // namespace

void token_trie::clear(std::string_view partitions) {
  clear(starting_with(partitions));
}

void token_trie::clear(const partition_filter& pick) {
  impl_->settle_locks();
  impl_->clear(pick, true);
}

void token_trie::clear_kv(std::string_view partitions) {
  impl_->settle_locks();
  impl_->clear(starting_with(partitions), false);
}

worker_id token_trie::add_worker(std::size_t kv_budget_bytes,
                                 std::size_t kv_host_budget_bytes) {
  return impl_->kv.add_worker(kv_budget_bytes, kv_host_budget_bytes);
}

void token_trie::set_kv_budget(worker_id worker, std::size_t kv_budget_bytes,
                               std::size_t kv_host_budget_bytes) {
  impl_->settle_locks();
  impl_->kv.set_budgets(worker, kv_budget_bytes, kv_host_budget_bytes);
}

std::size_t token_trie::kv_host_budget(worker_id worker) const {
  impl_->kv.check_worker(worker);
  return impl_->kv.host_budget(worker);
}

std::size_t token_trie::kv_budget(worker_id worker) const {
  impl_->kv.check_worker(worker);
  return impl_->kv.budget(worker);
}

std::uint32_t token_trie::workers() const {
  return impl_->kv.workers();
}

void token_trie::forget_worker(worker_id worker) {
  impl_->kv.check_worker(worker);
  impl_->settle_locks();
  impl_->kv.forget_worker(worker);
}

std::vector<kv_release> token_trie::take_released() {
  return impl_->kv.take_released();
}

std::vector<kv_release> token_trie::take_demoted() {
  return impl_->kv.take_demoted();
}

const trie_stats& token_trie::stats() const {
  return impl_->tree.stats;
}

std::uint32_t token_trie::lock_count(node_id node) const {
  return impl_->tree.checked(node).locks;
}

node_id token_trie::parent(node_id node) const {
  return impl_->tree.checked(node).parent;
}

std::uint32_t token_trie::depth(node_id node) const {
  return impl_->tree.checked(node).depth;
}

token_id token_trie::token(node_id node) const {
  return impl_->tree.checked(node).token;
}

std::string_view token_trie::partition(node_id node) const {
  const auto& tree = impl_->tree;
  tree.checked(node);
  const node_id root = tree.ancestor(node, 0);
  if (root == root_node)
    return {};
  return tree.partition_names.at(root);
}

bool token_trie::exists(node_id node) const {
  return impl_->tree.exists(node);
}

void token_trie::check_invariants() const {
  impl_->tree.check();
  impl_->rows.check();
  impl_->kv.check();
}

} // namespace canopy::cache
