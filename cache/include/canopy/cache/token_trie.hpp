#pragma once
// The token trie: one node per token of every cached sequence. A node may hold the
// next-token log-probs after its prefix, one KV handle per worker for its token, a
// lock count (in-flight use) and access statistics. Two hard byte budgets: stored
// log-prob bytes (plus an optional entry count, genlm-backend's OutputCache maxsize)
// and KV bytes per worker, each worker with its own budget (workers on other machines
// hold what their own storage holds). After every public operation the accounted
// bytes are at or under budget. Workers can be added while the trie is in use (a
// worker joining the engine late).
//
// Eviction (Note [eviction candidates]): for each resource (log-probs; KV on worker
// w) a node is a candidate when it holds the resource, is unlocked, and no child
// holds that resource. Without a window KV is prefix-closed (a token's KV is only
// valid on top of its prefix's KV), so this is exactly "KV leaves first"; for
// log-probs it is leaf-first order. Under a window KV follows the window rule below.
// Candidates live in one ordered set per resource keyed by the policy's
// eviction_key, so each eviction is O(log n). A node that holds nothing, has no
// children and is unlocked is removed at once; its parent may then become a
// candidate. Dropping a node's KV keeps its log-probs and the other way round.
//
// Sliding window (Note [windowed KV]): with kv_window W > 0, a token's KV is read
// only by the W-1 tokens after it, so KV is no longer prefix-closed. A KV entry is a
// candidate while no node within W-1 levels below it (itself included) is locked
// by lock(): KV W or more tokens above every query still in use goes, even on
// locked paths, and a path's usable KV prefix ends at the deepest node whose W-1
// nearest tokens (or all of them, from the first) hold KV.
//
// Host tier (Note [host tier] in kv_ledger.cpp): a worker may also have a host KV budget.
// KV its device budget evicts then moves to the host tier (a demotion the worker is
// told of) instead of being dropped, while the host budget has room; what the host
// tier evicts is dropped. promote_kv moves a locked path's host KV back within the
// device budget before a pass reads it. Not with a sliding window.
//
// Partitions (Note [partitions] in node_tree.cpp): sequences live in partitions named by
// a string, and nothing crosses them: equal tokens in two partitions are two paths, with
// their own rows, KV and statistics, so no caller can learn from a hit what another
// partition holds (tenants, cache_salt). The empty name is the shared partition, whose
// root is root_node; every other partition has a root of its own, at depth 0, made by
// its first insert and removed with its last node. Budgets and eviction span them all.
//
// Node ids are recycled after removal: hold a node id only while it is locked.
//
// Inside (cache/src): node_tree links the nodes; row_ledger accounts the stored rows
// and kv_ledger each worker's KV (tiers, window rule), each with its own invariant
// check; token_trie.cpp holds what spans them (walks, locks, attaching with room).
//
// Thread contract: not thread-safe; one owner (the cache actor) uses it.

#include <canopy/cache/eviction_policy.hpp>
#include <canopy/cache/logprob_row.hpp>
#include <canopy/cache/row_extra.hpp>
#include <canopy/cache/trie_view.hpp>
#include <canopy/cache/types.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string_view>
#include <vector>

namespace canopy::cache {

struct trie_config {
  std::size_t logprob_budget_bytes = std::size_t{1}
                                     << 30;           // hard limit on stored row bytes
  std::size_t logprob_max_entries = 0;                // 0: no entry-count limit
  std::size_t kv_budget_bytes = std::size_t{1} << 30; // hard limit of each initial worker
  std::size_t kv_host_budget_bytes = 0; // each initial worker's host tier; 0: none
  std::uint32_t workers = 1;            // initial workers
  eviction_policy policy = eviction_policy::lru;
  std::uint32_t kv_window = 0; // the model's sliding window W (tokens a token attends
                               // to, itself included); 0: all before it
};

/// The KV a worker holds for the start of a sequence.
struct kv_prefix {
  std::uint32_t length = 0; // leading tokens whose KV is present on the worker
  kv_handle handle = no_kv; // KV of token length-1; no_kv when length == 0
};

struct match_result {
  node_id node = root_node;  // deepest existing node on the path: the partition's
                             // root when no token matched, no_node when the partition
                             // has no nodes yet (insert then, not extend)
  std::uint32_t length = 0;  // its depth: how many leading tokens exist in the trie
  row_ptr logprobs;          // row after the WHOLE sequence, when stored
  row_extra_ptr extra;       // what is kept beside that row, if anything
  std::vector<kv_prefix> kv; // [workers]
};

/// A KV entry the trie dropped (its worker must be told to free it), or moved to the
/// host tier (its worker must be told to move it).
struct kv_release {
  worker_id worker = 0;
  kv_handle handle = no_kv;
  bool operator==(const kv_release& other) const {
    return worker == other.worker && handle == other.handle;
  }
};

struct trie_stats {
  std::uint64_t nodes = 0;                    // including the root
  std::uint64_t locked_nodes = 0;             // nodes in use (non-zero lock count)
  std::uint64_t logprob_entries = 0;          // nodes holding a row
  std::uint64_t logprob_bytes = 0;            // sum of their row and extra bytes
  std::uint64_t row_extras = 0;               // rows with an extra beside them
  std::vector<std::uint64_t> kv_entries;      // [workers]
  std::vector<std::uint64_t> kv_bytes;        // [workers]
  std::vector<std::uint64_t> kv_peak_bytes;   // [workers] the most kv_bytes has been
  std::vector<std::uint64_t> kv_host_entries; // [workers] KV entries on the host tier
  std::vector<std::uint64_t> kv_host_bytes;   // [workers] their bytes (not in kv_bytes)
  std::uint64_t logprob_evictions = 0;        // rows dropped to make room
  std::uint64_t kv_evictions = 0;             // KV entries dropped to make room
  std::uint64_t kv_demotions = 0;             // KV entries moved to a host tier
  std::uint64_t kv_demoted_bytes = 0;
  std::uint64_t kv_promotions = 0; // KV entries moved back to a device
  std::uint64_t kv_promoted_bytes = 0;
  std::uint64_t nodes_removed = 0;    // nodes removed once empty
  std::uint64_t refused_attaches = 0; // attaches that could not fit
  std::uint64_t partitions = 0;       // roots of named partitions now
};

/// Chooses partitions by name, for clear.
using partition_filter = std::function<bool(std::string_view name)>;

class token_trie {
public:
  explicit token_trie(trie_config config);
  ~token_trie();
  token_trie(const token_trie&) = delete;
  token_trie& operator=(const token_trie&) = delete;

  /// The configuration, with `workers` the current number of workers.
  const trie_config& config() const;

  /// Walks from the root along tokens[0..n) as far as nodes exist and refreshes the
  /// statistics of every node passed (access time, hits, max priority). KV prefix
  /// lengths are capped at kv_cap (a query that needs the row after its last token
  /// caps at n-1).
  match_result match(const token_id* tokens, std::size_t n, std::int32_t priority = 0,
                     std::uint32_t kv_cap = std::numeric_limits<std::uint32_t>::max());
  /// match() in the named partition ("" is the shared one).
  match_result match(std::string_view partition, const token_id* tokens, std::size_t n,
                     std::int32_t priority = 0,
                     std::uint32_t kv_cap = std::numeric_limits<std::uint32_t>::max());

  /// The node of tokens[0..n) in the named partition, with no statistics refreshed
  /// (a look that is no use); no_node when it does not exist (n == 0: the root).
  node_id find(std::string_view partition, const token_id* tokens, std::size_t n);

  /// Creates the missing nodes of tokens[0..n) (n >= 1) and returns the last one.
  node_id insert(const token_id* tokens, std::size_t n, std::int32_t priority = 0);
  /// insert() in the named partition, making its root when it has none.
  node_id insert(std::string_view partition, const token_id* tokens, std::size_t n,
                 std::int32_t priority = 0);
  /// insert() below `node`: creates the missing nodes of tokens[0..n) under it (none
  /// when n == 0) and returns the last one. A miss continues from the node its match
  /// ended at (match_result::node, with the tokens after match_result::length)
  /// instead of walking its prefix again.
  node_id extend(node_id node, const token_id* tokens, std::size_t n,
                 std::int32_t priority = 0);

  /// Per worker, the KV present for the start of `node`'s sequence: the deepest node
  /// at or above it whose KV there can be continued from (it and its W-1 nearest
  /// ancestors hold KV under a window; just it holding KV without one), as match()
  /// reports with kv_cap = its depth, without refreshing any statistics.
  std::vector<kv_prefix> kv_prefixes(node_id node) const;
  /// Whether a pass may continue from `node` itself on some worker: a worker's KV
  /// prefix of kv_prefixes(node) ends at it (under a window, KV held at a node is not
  /// enough: its W-1 nearest ancestors must hold KV too).
  bool kv_continues(node_id node) const;
  /// kv_prefixes(node), with each prefix's host-tier KV first moved back to its
  /// worker's device (promote_kv): a prefix ends above the KV a move could not fit.
  /// `node` must be locked where a worker has a host tier.
  std::vector<kv_prefix> promoted_kv_prefixes(node_id node);

  /// The node of `prefix` in `partition` (its root for an empty prefix) and the nodes
  /// within `limits` below it, for people to read (trie_view.hpp); empty when the
  /// prefix is not in the trie. One pass over every node of the trie, so not for hot
  /// paths; what the trie holds and its statistics are unchanged.
  trie_view view(std::string_view partition, const token_id* prefix, std::size_t n,
                 const trie_view_limits& limits);

  /// The nodes below depth `from_depth` (0: its partition's root) down to `node`:
  /// result[i] has depth from_depth+i+1. std::out_of_range past depth(node).
  std::vector<node_id> path(node_id node, std::uint32_t from_depth = 0) const;
  /// The node of `node`'s path at `depth` (at most depth(node); 0: its partition's
  /// root), found by walking up from `node`. std::out_of_range past depth(node).
  node_id ancestor(node_id node, std::uint32_t depth) const;

  /// Locks `node`, and so its whole path: a node is in use while its lock count is
  /// non-zero, and in-use nodes are never evicted nor removed. A node's lock count is
  /// its own locks plus its children in use, so locking stops climbing at the first
  /// ancestor already in use (queries sharing a long prompt cost O(new nodes)).
  /// Under a window, what a lock keeps of KV is the node's and its W-1 nearest
  /// ancestors' (O(W) per lock): rows stay locked along the whole path.
  void lock(node_id node);
  /// Undoes one lock(node). The node may become a candidate or be removed.
  void unlock(node_id node);

  /// Stores the row after the node's prefix, evicting candidates (never `node` or its
  /// ancestors) until it fits. False when it cannot fit; a row already present is kept.
  bool attach_logprobs(node_id node, row_ptr row);

  /// Keeps `extra` beside the node's row, charged to the log-prob budget with it and
  /// dropped with it, evicting candidates (never `node` or its ancestors) until it
  /// fits. False when the node no longer holds `row` (the very object the extra was
  /// computed from: it was evicted, or another was stored), holds an extra already,
  /// or the extra cannot fit; the row stays either way.
  bool attach_extra(node_id node, const row_ptr& row, row_extra_ptr extra);

  /// Stores the KV handle of the node's token on `worker`, which costs `bytes` of that
  /// worker's budget, evicting KV candidates of that worker (never `node` or the
  /// prefix it continues) until it fits. False (and the caller still owns the handle)
  /// when the parent lacks KV on that worker (or holds it on the host tier: promote
  /// it first), the node already holds KV there or
  /// (under a window) once held it and a child's KV still builds on that, or it
  /// cannot fit.
  bool attach_kv(node_id node, worker_id worker, kv_handle handle, std::size_t bytes);

  /// Moves the host-tier KV on `node`'s path on `worker` back to the device tier, from
  /// the root down, demoting (or dropping) other device KV to make room. Returns the
  /// depth down to which the path's KV is on the device: `node`'s depth when every
  /// move fitted, less where one did not (what the rest of the device holds is
  /// locked). `node` must be locked (its path is then kept). A worker's pass reads
  /// its prefix only down to that depth.
  std::uint32_t promote_kv(node_id node, worker_id worker);

  row_ptr logprobs(node_id node) const;
  row_extra_ptr extra(node_id node) const;               // null when none
  kv_handle kv(node_id node, worker_id worker) const;    // no_kv when absent
  bool kv_on_host(node_id node, worker_id worker) const; // false when absent

  /// Drops log-probs and KV of every unlocked node (released KV is queued) in the
  /// partitions whose names start with `partitions` ("": all of them).
  void clear(std::string_view partitions = {});
  /// The same in the partitions whose names `pick` chooses ("" is the shared one).
  void clear(const partition_filter& pick);
  /// Drops the KV of every unlocked node (released KV is queued) in those partitions.
  void clear_kv(std::string_view partitions = {});
  /// The worker is gone: drop all of its KV, locked or not, without queueing releases.
  void forget_worker(worker_id worker);

  /// Adds a worker whose KV may take `kv_budget_bytes` on its device and
  /// `kv_host_budget_bytes` on its host tier; returns its id (the number of workers
  /// before the call). std::invalid_argument for a host tier under a window.
  worker_id add_worker(std::size_t kv_budget_bytes, std::size_t kv_host_budget_bytes = 0);
  /// Sets a worker's KV budgets. The worker must hold no KV (it is new, or back after
  /// forget_worker), so the budgets hold at once; std::logic_error otherwise.
  void set_kv_budget(worker_id worker, std::size_t kv_budget_bytes,
                     std::size_t kv_host_budget_bytes = 0);
  std::size_t kv_budget(worker_id worker) const;
  std::size_t kv_host_budget(worker_id worker) const;
  std::uint32_t workers() const;

  /// KV entries dropped since the last call, for the owner to free at the workers.
  std::vector<kv_release> take_released();
  /// KV entries moved to host tiers since the last call, for the owner to tell their
  /// workers (before any pass that may read them).
  std::vector<kv_release> take_demoted();

  const trie_stats& stats() const;
  /// Own locks plus children in use (see lock()).
  std::uint32_t lock_count(node_id node) const;
  node_id parent(node_id node) const;
  std::uint32_t depth(node_id node) const;
  token_id token(node_id node) const;
  /// The name of the partition `node` lies in ("" for the shared one); O(its depth).
  std::string_view partition(node_id node) const;
  bool exists(node_id node) const;

  /// Verifies every invariant (budgets, parent/child links, depths, lock counts,
  /// candidate sets, accounting); throws std::logic_error naming the first violation.
  /// O(n log n): for tests.
  void check_invariants() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace canopy::cache
