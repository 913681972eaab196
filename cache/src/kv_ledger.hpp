#pragma once
// The KV of a token_trie, per worker: which nodes hold a KV handle on which worker,
// in which tier (device or host, Note [host tier] in kv_ledger.cpp), under which rule
// (prefix-closed, or the sliding window's, Note [windowed KV]), against each worker's
// budgets; the candidates each tier evicts; and the releases and demotions queued for
// the owner to send. Internal to canopy::cache.
//
// Thread contract: not thread-safe; owned by one token_trie beside its node_tree.

#include "node_tree.hpp"

#include <deque>

namespace canopy::cache::detail {

class kv_ledger {
public:
  explicit kv_ledger(node_tree& tree);

  std::uint32_t workers() const { return tree_.config.workers; }
  void check_worker(worker_id worker) const;

  // KV no eviction may take: on a locked node, or under a window, within W-1 levels
  // above a lock.
  bool kept(node_id id) const {
    return tree_.windowed() ? tree_.held[id].window_locks != 0
                            : tree_.held[id].ledger_locked;
  }

  // Brings the candidacy of the node's entries up to date after a lock changed.
  void refresh_node(node_id id);
  // Moves the node's candidate entries to the key its statistics now give.
  void reposition(node_id id, const eviction_key& to);
  // A lock reached (or left) the node (without a window: windows keep KV by
  // protect_window).
  void account_lock(node_id id, bool locking);
  // Counts a lock of `id` in the window_locks of it and its W-1 nearest ancestors,
  // whose KV the lock then keeps (O(W)).
  void protect_window(node_id id, bool locking);

  // Whether KV of `worker` may be attached at `id`: it holds no entry there, and its
  // parent (unless a root) holds device KV there.
  bool attachable(node_id id, worker_id worker) const;
  // `bytes` more fit the worker's device budget now / once every KV not kept went.
  bool fits(worker_id worker, std::size_t bytes) const;
  bool feasible(worker_id worker, std::size_t bytes) const;
  void add(node_id id, worker_id worker, kv_handle handle, std::size_t bytes);
  // Drops the node's KV on `worker` (queueing its release when asked); the caller
  // prunes.
  void drop(node_id id, worker_id worker, bool queue_release);
  // Evicts the worker's first device candidate: to its host tier when that can make
  // room, else for good.
  void evict(worker_id worker);

  // Per worker, the KV prefix a pass may continue from at or above `end`.
  void collect(node_id end, std::vector<kv_prefix>& kv) const;
  // Whether some worker's usable KV prefix ends at `id` itself.
  bool reaches(node_id id) const;
  // Moves the host KV on `node`'s path back to the device (see token_trie::promote_kv).
  std::uint32_t promote_path(node_id node, worker_id worker);

  worker_id add_worker(std::size_t budget, std::size_t host_budget);
  void set_budgets(worker_id worker, std::size_t budget, std::size_t host_budget);
  std::size_t budget(worker_id worker) const { return budgets_[worker]; }
  std::size_t host_budget(worker_id worker) const { return host_budgets_[worker]; }
  // The worker is gone: its KV goes, locked or not, and nothing is queued for it.
  void forget_worker(worker_id worker);

  std::vector<kv_release> take_released();
  std::vector<kv_release> take_demoted();

  // Entries, child counts, tiers, window locks, candidates, accounting and budgets,
  // recomputed from the nodes.
  void check() const;

private:
  void check_host_tier(std::size_t host_budget) const;
  candidate_set& tier_set(const kv_entry& e);
  void sync_flags(node_id id);
  bool candidate_rule(node_id id, const kv_entry& e) const;
  // Puts the entry in or out of its tier's candidates by candidate_rule; true if it
  // moved.
  bool update_candidacy(node_id id, kv_entry& e);
  void refresh(node_id id, kv_entry& e);
  void remove_entry(node_id id, kv_entry* e);
  void drop_evicted(node_id id, worker_id worker);
  node_id host_descendant_candidate(node_id id, worker_id worker) const;
  bool make_host_room(worker_id worker, std::size_t bytes);
  void demote(node_id id, worker_id worker);
  bool promote(node_id id, worker_id worker);

  node_tree& tree_;
  // [workers]. Deques, so adding a worker never moves the sets that entries hold
  // iterators into.
  std::deque<candidate_set> device_candidates_;
  std::deque<candidate_set> host_candidates_;
  std::vector<kv_release> released_;
  std::vector<kv_release> demoted_;
  // What is kept (no eviction can free it), which makes refusals exact.
  std::vector<std::size_t> locked_bytes_;      // [workers]
  std::vector<std::size_t> locked_host_bytes_; // [workers]
  std::vector<std::size_t> budgets_;           // [workers] each worker's device budget
  std::vector<std::size_t> host_budgets_;      // [workers] 0: no host tier
};

} // namespace canopy::cache::detail
