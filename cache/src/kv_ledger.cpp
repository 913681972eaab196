#include "kv_ledger.hpp"

#include <algorithm>
#include <stdexcept>

namespace canopy::cache::detail {

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
//    run that starts at depth 1 (collect).
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
//  - promote_path moves a locked path's host KV back, from the root down, within the
//    device budget (evicting device candidates, which the lock keeps off the path);
//  - no KV is attached under host KV (a pass reads its prefix promoted). With
//    demotion leaf-first and promotion root-first, every child of host KV is then on
//    the host: host KV hangs in subtrees below device KV. So a device candidate that
//    cannot be demoted (the host's room is locked) has only host descendants, all
//    unlocked, which go first: their leaves are host candidates.
// Demotions are queued for the owner to send (take_demoted); promotions are not: the
// worker moves host KV back itself when a pass reads it. No host tier under a window.

kv_ledger::kv_ledger(node_tree& tree) : tree_(tree) {
  check_host_tier(tree.config.kv_host_budget_bytes);
  // The initial workers join as later ones do: one place grows every per-worker table.
  const std::uint32_t initial = tree.config.workers;
  tree.config.workers = 0;
  for (std::uint32_t w = 0; w < initial; ++w)
    add_worker(tree.config.kv_budget_bytes, tree.config.kv_host_budget_bytes);
}

void kv_ledger::check_host_tier(std::size_t host_budget) const {
  if (host_budget != 0 && tree_.windowed())
    throw std::invalid_argument("token_trie: a KV host tier is not supported with a "
                                "sliding window");
}

void kv_ledger::check_worker(worker_id worker) const {
  if (worker >= workers())
    throw std::out_of_range("token_trie: no worker " + std::to_string(worker));
}

// --- candidates (Note [eviction candidates] in token_trie.hpp) ---

candidate_set& kv_ledger::tier_set(const kv_entry& e) {
  return e.on_host ? host_candidates_[e.worker] : device_candidates_[e.worker];
}

// Brings the node's summary of its KV entries up to date after they changed.
void kv_ledger::sync_flags(node_id id) {
  const std::vector<kv_entry>& kv = tree_.held[id].kv;
  tree_.nodes[id].holds_kv = !kv.empty();
  tree_.nodes[id].kv_candidate =
      std::any_of(kv.begin(), kv.end(), [](const kv_entry& e) { return e.candidate; });
}

// Without a window only KV leaves go (the rest is some leaf's prefix); with one,
// any KV not kept, since a kept node's KV never reaches more than W-1 levels up.
// On the host tier, only entries without children holding KV (Note [host tier]).
bool kv_ledger::candidate_rule(node_id id, const kv_entry& e) const {
  if (e.handle == no_kv || kept(id))
    return false;
  return e.on_host ? e.kv_children == 0 : tree_.windowed() || e.device_children == 0;
}

bool kv_ledger::update_candidacy(node_id id, kv_entry& e) {
  return set_candidate(tier_set(e), e.candidate, e.slot, id, tree_,
                       candidate_rule(id, e));
}

void kv_ledger::refresh(node_id id, kv_entry& e) {
  update_candidacy(id, e);
  sync_flags(id);
}

// A lock changes no entry, so the node's summary changes only with a candidacy.
void kv_ledger::refresh_node(node_id id) {
  bool changed = false;
  for (kv_entry& e : tree_.held[id].kv)
    changed |= update_candidacy(id, e);
  if (changed)
    sync_flags(id);
}

void kv_ledger::reposition(node_id id, const eviction_key& to) {
  for (kv_entry& e : tree_.held[id].kv)
    if (e.candidate)
      move_candidate(tier_set(e), e.slot, to);
}

// --- locks ---

void kv_ledger::account_lock(node_id id, bool locking) {
  if (tree_.windowed())
    return;
  for (const kv_entry& e : tree_.held[id].kv) {
    auto& total = (e.on_host ? locked_host_bytes_ : locked_bytes_)[e.worker];
    total = locking ? total + e.bytes : total - e.bytes;
  }
}

void kv_ledger::protect_window(node_id id, bool locking) {
  tree_.for_window(id, [&](node_id n) {
    holding& h = tree_.held[n];
    const bool was_kept = h.window_locks != 0;
    h.window_locks = locking ? h.window_locks + 1 : h.window_locks - 1;
    if (was_kept == (h.window_locks != 0))
      return;
    for (kv_entry& e : h.kv) {
      auto& total = locked_bytes_[e.worker];
      total = locking ? total + e.bytes : total - e.bytes; // a tombstone's bytes are 0
      refresh(n, e);
    }
  });
}

// --- entries ---

bool kv_ledger::attachable(node_id id, worker_id worker) const {
  const node_id parent = tree_.nodes[id].parent;
  if (find_kv(tree_.held[id], worker))
    return false;
  if (tree_.is_root(parent))
    return true;
  const kv_entry* above = held_kv(tree_.held[parent], worker);
  return above && !above->on_host;
}

bool kv_ledger::fits(worker_id worker, std::size_t bytes) const {
  return fits_in(tree_.stats.kv_bytes[worker], bytes, budgets_[worker]);
}

bool kv_ledger::feasible(worker_id worker, std::size_t bytes) const {
  return fits_in(locked_bytes_[worker], bytes, budgets_[worker]);
}

void kv_ledger::add(node_id id, worker_id worker, kv_handle handle, std::size_t bytes) {
  auto& s = tree_.stats;
  std::vector<kv_entry>& kv = tree_.held[id].kv;
  kv.push_back(kv_entry{worker, handle, bytes, 0, 0, false, false, {}});
  s.kv_bytes[worker] += bytes;
  s.kv_peak_bytes[worker] = std::max(s.kv_peak_bytes[worker], s.kv_bytes[worker]);
  ++s.kv_entries[worker];
  if (kept(id))
    locked_bytes_[worker] += bytes;
  const node_id parent = tree_.nodes[id].parent;
  if (kv_entry* above = find_kv(tree_.held[parent], worker)) {
    ++above->kv_children;
    ++above->device_children;
    refresh(parent, *above);
  }
  refresh(id, kv.back());
}

void kv_ledger::remove_entry(node_id id, kv_entry* e) {
  std::vector<kv_entry>& kv = tree_.held[id].kv;
  *e = kv.back();
  kv.pop_back();
  sync_flags(id);
}

// Its entry stays as a tombstone while children hold KV there (a window, or a bulk
// drop reaching a parent first), and a parent's tombstone goes with its last such
// child.
void kv_ledger::drop(node_id id, worker_id worker, bool queue_release) {
  auto& s = tree_.stats;
  kv_entry* e = held_kv(tree_.held[id], worker);
  const bool on_host = e->on_host;
  leave_candidates(tier_set(*e), e->candidate, e->slot);
  (on_host ? s.kv_host_bytes : s.kv_bytes)[worker] -= e->bytes;
  --(on_host ? s.kv_host_entries : s.kv_entries)[worker];
  if (kept(id))
    (on_host ? locked_host_bytes_ : locked_bytes_)[worker] -= e->bytes;
  if (queue_release)
    released_.push_back(kv_release{worker, e->handle});
  if (e->kv_children != 0) {
    e->handle = no_kv;
    e->bytes = 0;
    sync_flags(id);
  } else {
    remove_entry(id, e);
  }
  const node_id parent = tree_.nodes[id].parent;
  if (kv_entry* above = find_kv(tree_.held[parent], worker)) {
    --above->kv_children;
    if (!on_host)
      --above->device_children;
    if (above->handle == no_kv && above->kv_children == 0)
      remove_entry(parent, above);
    else
      refresh(parent, *above);
  }
}

void kv_ledger::drop_evicted(node_id id, worker_id worker) {
  drop(id, worker, true);
  ++tree_.stats.kv_evictions;
  tree_.prune(id);
}

void kv_ledger::evict(worker_id worker) {
  if (device_candidates_[worker].empty())
    violation("no KV candidate left to evict on worker " + std::to_string(worker));
  const node_id id = device_candidates_[worker].begin()->second;
  if (make_host_room(worker, held_kv(tree_.held[id], worker)->bytes)) {
    demote(id, worker);
    return;
  }
  // Under a window a candidate with children leaves a tombstone (Note [windowed KV]).
  while (!tree_.windowed() && held_kv(tree_.held[id], worker)->kv_children != 0)
    drop_evicted(host_descendant_candidate(id, worker), worker);
  drop_evicted(id, worker);
}

// A host candidate below `id` (which has host descendants only: Note [host tier]).
node_id kv_ledger::host_descendant_candidate(node_id id, worker_id worker) const {
  for (const auto& [key, candidate] : host_candidates_[worker])
    for (node_id cur = tree_.nodes[candidate].parent; !tree_.is_root(cur);
         cur = tree_.nodes[cur].parent)
      if (cur == id)
        return candidate;
  violation(node_name(id) + ": KV children but no host candidate below it");
}

// --- tiers (Note [host tier]) ---

// Drops host candidates until `bytes` more fit the worker's host budget; false (and
// nothing dropped) when even dropping all that is not kept would not be enough.
bool kv_ledger::make_host_room(worker_id worker, std::size_t bytes) {
  const auto budget = host_budgets_[worker];
  if (budget == 0 || !fits_in(locked_host_bytes_[worker], bytes, budget))
    return false;
  while (!fits_in(tree_.stats.kv_host_bytes[worker], bytes, budget)) {
    if (host_candidates_[worker].empty())
      return false; // the rest builds on KV on the device that is kept
    drop_evicted(host_candidates_[worker].begin()->second, worker);
  }
  return true;
}

// Moves an unkept device entry to the host tier, whose room is made.
void kv_ledger::demote(node_id id, worker_id worker) {
  auto& s = tree_.stats;
  kv_entry* e = held_kv(tree_.held[id], worker);
  leave_candidates(device_candidates_[worker], e->candidate, e->slot);
  e->on_host = true;
  s.kv_bytes[worker] -= e->bytes;
  --s.kv_entries[worker];
  s.kv_host_bytes[worker] += e->bytes;
  ++s.kv_host_entries[worker];
  ++s.kv_demotions;
  s.kv_demoted_bytes += e->bytes;
  demoted_.push_back(kv_release{worker, e->handle});
  refresh(id, *e);
  const node_id parent = tree_.nodes[id].parent;
  if (kv_entry* above = find_kv(tree_.held[parent], worker)) {
    --above->device_children;
    refresh(parent, *above);
  }
}

// Moves a kept host entry (a locked path's) back to the device when its budget can
// make room; false (nothing moved) otherwise.
bool kv_ledger::promote(node_id id, worker_id worker) {
  auto& s = tree_.stats;
  kv_entry* e = held_kv(tree_.held[id], worker);
  const auto bytes = e->bytes;
  if (!feasible(worker, bytes))
    return false;
  // It leaves the host first, so the device's demotions may use its room.
  e->on_host = false;
  s.kv_host_bytes[worker] -= bytes;
  --s.kv_host_entries[worker];
  locked_host_bytes_[worker] -= bytes;
  locked_bytes_[worker] += bytes;
  while (!fits(worker, bytes))
    evict(worker);
  s.kv_bytes[worker] += bytes;
  ++s.kv_entries[worker];
  s.kv_peak_bytes[worker] = std::max(s.kv_peak_bytes[worker], s.kv_bytes[worker]);
  ++s.kv_promotions;
  s.kv_promoted_bytes += bytes;
  refresh(id, *e);
  const node_id parent = tree_.nodes[id].parent;
  if (kv_entry* above = find_kv(tree_.held[parent], worker)) {
    ++above->device_children;
    refresh(parent, *above);
  }
  return true;
}

std::uint32_t kv_ledger::promote_path(node_id node, worker_id worker) {
  if (!kept(node))
    throw std::logic_error("token_trie::promote_kv: " + node_name(node) +
                           " is not locked");
  std::vector<node_id> path;
  for (node_id cur = node; !tree_.is_root(cur); cur = tree_.nodes[cur].parent)
    path.push_back(cur);
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    const kv_entry* e = held_kv(tree_.held[*it], worker);
    if (!e)
      break; // the path's KV ends here
    if (e->on_host && !promote(*it, worker))
      return tree_.nodes[*it].depth - 1;
  }
  return tree_.nodes[node].depth;
}

// --- prefixes ---

// kv[w] comes from the deepest node at or above `end` that ends a run of `need`
// nodes holding KV on worker w, or of fewer that starts at depth 1: without a window
// one node (KV is prefix-closed), with one W-1 (what a pass reads). So without a
// window, walking up usually ends at `end` itself, where a walk down would read the
// holding of every node; with one it reads about W-1 nodes.
void kv_ledger::collect(node_id end, std::vector<kv_prefix>& kv) const {
  const std::uint32_t need = std::max(tree_.config.kv_window, 2u) - 1;
  std::vector<std::uint32_t> run(kv.size()); // [workers] nodes in the current run
  std::size_t missing = kv.size();
  for (node_id id = end; !tree_.is_root(id) && missing != 0;
       id = tree_.nodes[id].parent) {
    const node& x = tree_.nodes[id];
    if (!x.holds_kv && need == 1)
      continue; // no run to break
    for (worker_id w = 0; w < kv.size(); ++w) {
      if (kv[w].length != 0 && run[w] == 0)
        continue; // found
      const kv_entry* e = x.holds_kv ? held_kv(tree_.held[id], w) : nullptr;
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

bool kv_ledger::reaches(node_id id) const {
  const auto& kv = tree_.held[id].kv;
  const bool held = std::any_of(kv.begin(), kv.end(),
                                [](const kv_entry& e) { return e.handle != no_kv; });
  if (!held || !tree_.windowed())
    return held; // without a window KV is prefix-closed: any KV held continues
  // Under a window, KV held may lack the W-1 tokens before it that a pass reads.
  std::vector<kv_prefix> prefixes(workers());
  collect(id, prefixes);
  const auto depth = tree_.nodes[id].depth;
  return std::any_of(prefixes.begin(), prefixes.end(),
                     [&](const kv_prefix& p) { return p.length == depth; });
}

// --- workers ---

worker_id kv_ledger::add_worker(std::size_t budget, std::size_t host_budget) {
  check_host_tier(host_budget);
  const auto id = static_cast<worker_id>(tree_.config.workers++);
  device_candidates_.emplace_back();
  host_candidates_.emplace_back();
  locked_bytes_.push_back(0);
  locked_host_bytes_.push_back(0);
  budgets_.push_back(budget);
  host_budgets_.push_back(host_budget);
  auto& s = tree_.stats;
  for (auto* table : {&s.kv_entries, &s.kv_bytes, &s.kv_peak_bytes, &s.kv_host_entries,
                      &s.kv_host_bytes})
    table->push_back(0);
  return id;
}

void kv_ledger::set_budgets(worker_id worker, std::size_t budget,
                            std::size_t host_budget) {
  check_worker(worker);
  check_host_tier(host_budget);
  if (tree_.stats.kv_entries[worker] != 0 || tree_.stats.kv_host_entries[worker] != 0)
    throw std::logic_error("token_trie::set_kv_budget: worker " + std::to_string(worker) +
                           " holds KV (forget it first)");
  budgets_[worker] = budget;
  host_budgets_[worker] = host_budget;
}

void kv_ledger::forget_worker(worker_id worker) {
  for (node_id id = 1; id < tree_.nodes.size(); ++id) {
    if (tree_.nodes[id].live && held_kv(tree_.held[id], worker)) {
      drop(id, worker, false);
      tree_.prune(id);
    }
  }
  // Nobody is left to free or move what was queued for the worker either.
  for (auto* queue : {&released_, &demoted_})
    queue->erase(std::remove_if(queue->begin(), queue->end(),
                                [&](const kv_release& r) { return r.worker == worker; }),
                 queue->end());
}

std::vector<kv_release> kv_ledger::take_released() {
  std::vector<kv_release> taken;
  taken.swap(released_);
  return taken;
}

std::vector<kv_release> kv_ledger::take_demoted() {
  std::vector<kv_release> taken;
  taken.swap(demoted_);
  return taken;
}

// --- invariants ---

void kv_ledger::check() const {
  const auto& nodes = tree_.nodes;
  const std::size_t n_workers = workers();
  const auto& s = tree_.stats;
  if (budgets_.size() != n_workers || device_candidates_.size() != n_workers ||
      host_budgets_.size() != n_workers || host_candidates_.size() != n_workers ||
      locked_bytes_.size() != n_workers || locked_host_bytes_.size() != n_workers ||
      s.kv_entries.size() != n_workers || s.kv_bytes.size() != n_workers ||
      s.kv_peak_bytes.size() != n_workers || s.kv_host_entries.size() != n_workers ||
      s.kv_host_bytes.size() != n_workers)
    violation("per-worker tables disagree with the number of workers");

  std::vector<std::uint32_t> kv_child_count(nodes.size() * n_workers);
  std::vector<std::uint32_t> device_child_count(nodes.size() * n_workers);
  std::vector<std::uint64_t> entries(n_workers), bytes(n_workers), locked(n_workers);
  std::vector<std::uint64_t> host_entries(n_workers), host_bytes(n_workers),
      locked_host(n_workers);
  std::vector<std::size_t> members(n_workers), host_members(n_workers);
  std::vector<std::uint32_t> window_locks(nodes.size());
  for (node_id id = 0; id < nodes.size(); ++id) {
    const node& x = nodes[id];
    const holding& h = tree_.held[id];
    if (!x.live)
      continue;
    // Each lock counts in window_locks of its node and W-1 ancestors (none without a
    // window).
    tree_.for_window(id, [&](node_id n) { window_locks[n] += h.own_locks; });
    if (x.holds_kv != !h.kv.empty())
      violation(node_name(id) + ": holds_kv disagrees with its KV entries");
    bool any_candidate = false;
    for (const kv_entry& e : h.kv) {
      const auto same_worker = [&](const kv_entry& f) { return f.worker == e.worker; };
      if (e.worker >= n_workers ||
          std::count_if(h.kv.begin(), h.kv.end(), same_worker) != 1)
        violation(node_name(id) + ": KV entry of an unknown or repeated worker");
      const bool tombstone = e.handle == no_kv;
      if (tombstone && (!tree_.windowed() || e.kv_children == 0 || e.bytes != 0))
        violation(node_name(id) +
                  ": KV tombstone without a window, children or zero bytes");
      // Under a window the parent's KV may be gone, but its tombstone counts this.
      const kv_entry* above = find_kv(tree_.held[x.parent], e.worker);
      if (!tombstone && !tree_.is_root(x.parent) &&
          !(above && (tree_.windowed() || above->handle != no_kv)))
        violation(node_name(id) + ": KV without its prefix's KV (not prefix-closed)");
      if (!tombstone && !e.on_host && above && above->on_host)
        violation(node_name(id) + ": device KV below host KV");
      if (e.on_host && (tombstone || tree_.windowed() || host_budgets_[e.worker] == 0))
        violation(node_name(id) + ": host-tier KV that is a tombstone, windowed or "
                                  "of a worker without a host tier");
      if (!tombstone) {
        ++kv_child_count[x.parent * n_workers + e.worker];
        device_child_count[x.parent * n_workers + e.worker] += e.on_host ? 0 : 1;
        ++(e.on_host ? host_entries : entries)[e.worker];
        (e.on_host ? host_bytes : bytes)[e.worker] += e.bytes;
        if (kept(id))
          (e.on_host ? locked_host : locked)[e.worker] += e.bytes;
      }
      if (e.candidate != candidate_rule(id, e))
        violation(node_name(id) + ": KV candidate flag disagrees with the rule");
      // A candidate's kept element must be the one keyed by its statistics now; the
      // set sizes below rule out elements of entries that are no candidates.
      const auto& tier =
          e.on_host ? host_candidates_[e.worker] : device_candidates_[e.worker];
      const auto found = tier.find({tree_.key_of(id), id});
      if (e.candidate && (found == tier.end() || found != e.slot))
        violation(node_name(id) + ": flagged KV candidate missing from its set");
      (e.on_host ? host_members : members)[e.worker] += e.candidate ? 1 : 0;
      any_candidate = any_candidate || e.candidate;
    }
    if (x.kv_candidate != any_candidate)
      violation(node_name(id) + ": kv_candidate disagrees with its KV entries");
  }

  for (node_id id = 0; id < nodes.size(); ++id) {
    if (!nodes[id].live)
      continue;
    if (tree_.held[id].window_locks != window_locks[id])
      violation(node_name(id) + ": window lock count disagrees with the locks below it");
    if (tree_.is_root(id))
      continue;
    for (worker_id w = 0; w < n_workers; ++w) {
      const kv_entry* e = find_kv(tree_.held[id], w);
      if ((e ? e->kv_children : 0) != kv_child_count[id * n_workers + w])
        violation(node_name(id) + ": count of children holding KV is wrong");
      if ((e ? e->device_children : 0) != device_child_count[id * n_workers + w])
        violation(node_name(id) + ": count of children holding device KV is wrong");
    }
  }

  for (worker_id w = 0; w < n_workers; ++w) {
    const std::string worker = "worker " + std::to_string(w);
    if (device_candidates_[w].size() != members[w] ||
        host_candidates_[w].size() != host_members[w])
      violation("a KV candidate set of " + worker + " holds non-candidates");
    if (s.kv_entries[w] != entries[w] || s.kv_bytes[w] != bytes[w] ||
        s.kv_host_entries[w] != host_entries[w] || s.kv_host_bytes[w] != host_bytes[w])
      violation("KV statistics of " + worker + " disagree with the nodes");
    if (locked_bytes_[w] != locked[w] || locked_host_bytes_[w] != locked_host[w])
      violation("locked KV totals of " + worker + " disagree with the nodes");
    if (bytes[w] > budgets_[w] || host_bytes[w] > host_budgets_[w])
      violation("KV bytes of " + worker + " over a budget");
    if (s.kv_peak_bytes[w] < bytes[w])
      violation("KV peak of " + worker + " below its KV bytes");
  }
}

} // namespace canopy::cache::detail
