#pragma once
// The cache actor: owns the token trie (rows and KV handles per node), its eviction
// policy and byte budgets (each worker's KV under the budget it joined with). It
// answers hits itself, so hits never reach the batcher; it locks each miss's node and
// forwards the miss to the batcher, reports how a batch stands before its pass,
// stores what a pass computed (rows come encoded in the storage dtype), and tells
// workers to free the KV it evicts. It names the loaded LoRA adapters, so a query's
// adapter is part of its cache key (Note [adapter scopes] in cache_actor.cpp).
// Thread contract: the state is touched only by the actor.

#include <canopy/actors/engine_metrics.hpp>
#include <canopy/cache/token_trie.hpp>
#include <canopy/messages/actor_interfaces.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace canopy::actors {

struct cache_options {
  bool enabled = true;     // false: every query is a miss
  cache::trie_config trie; // its workers: 0 (they join)
};

/// What the cache knows of a worker that joined.
struct cache_worker {
  messages::worker_actor handle; // where its evicted KV is freed
  std::uint64_t kv_bytes_per_token = 0;
};

struct cache_state {
  cache_options options;
  std::unique_ptr<cache::token_trie> trie; // made when the actor starts
  std::vector<cache_worker> workers;       // [trie workers]
  messages::batcher_actor batcher;
  std::shared_ptr<engine_metrics> metrics;
  std::map<std::string, std::string> adapters; // loaded adapters' keys by name

  /// Puts a caller's query in its cache scope: its adapter's name becomes the loaded
  /// instance's key, and its partition the trie partition of (partition, key). False,
  /// with `q` unchanged, when no adapter of that name is loaded.
  bool scope(messages::query& q) const;
  /// The row answering the sequence that ends at `node` now, or null: its stored row,
  /// and when require_kv (cache_kv) its KV on some worker as well. Lookups and
  /// prepares both ask this.
  cache::row_ptr answerable(cache::node_id node, bool require_kv) const;
  /// A miss of `q`: makes the nodes `m` did not reach (in q's partition) and locks
  /// the last, which the query holds until the batcher releases it. Returns that node.
  cache::node_id lock_miss(const messages::query& q, const cache::match_result& m);
  /// How one locked sequence of a batch stands (see prepared_entry). Under a sliding
  /// window, locks the end of each KV prefix that the sequence's own lock does not
  /// keep (its pins), so that no KV a pass reads is released while it runs.
  messages::prepared_entry prepare(cache::node_id leaf, bool require_kv);
  /// Attaches a pass's KV and rows (taking them from the request); returns the rows
  /// of every item, in order.
  std::vector<messages::shared_logprobs> store(messages::store_request& request);
  /// A worker took slot `w`: a new one, or one back after its loss, holding no KV.
  void join(cache::worker_id w, messages::worker_actor handle,
            const messages::worker_description& description);
  /// Sends the KV the trie dropped to its workers, and publishes the accounting.
  void after_change();

  static inline const char* name = "canopy.cache";
};

messages::cache_actor::behavior_type
cache(messages::cache_actor::stateful_pointer<cache_state> self, cache_options options,
      std::shared_ptr<engine_metrics> metrics);

} // namespace canopy::actors
