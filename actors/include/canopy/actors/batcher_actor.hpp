#pragma once
// The batcher actor. Misses arrive from the cache actor; a query whose FULL sequence
// equals one already waiting or in flight joins it (never a suffix key: equal
// suffixes under different prefixes are different queries). A batch leaves when it
// reaches batch_size, when batch_timeout has passed since its FIRST waiting query,
// or at once when a worker is idle and flush_when_idle is set; each worker runs at
// most passes_in_flight batches at a time (one by default), and the next batch's
// prepare follows the previous batch's store into the cache's mailbox, so every batch
// is prepared against a cache that holds the results of the batch before it. Each
// entry holds a lock, taken by the cache at lookup, on its sequence's node until it
// leaves. Per batch: the cache reports hits and KV prefixes (prepare), the planner
// folds prefixes and picks the worker, the worker runs the pass, the cache stores the
// results (store), and every waiter gets its row.
// Workers join (in-process ones at start, remote ones when their link has admitted
// them) and are lost when their handle goes down or a pass to them fails below the
// backend (the worker is gone): the queries of every pass they had not returned go
// back to the head of the queue for the remaining workers, and only when none is left
// do they fail with worker_lost. A failed pass, a cancellation, an expired deadline or
// shutdown reaches every waiter as an error. LoRA adapters are loaded on every worker,
// and on each that joins, before any pass under them.
// Thread contract: the state is touched only by the actor.

#include <canopy/actors/batch_planner.hpp>
#include <canopy/actors/earliest_timer.hpp>
#include <canopy/actors/engine_metrics.hpp>
#include <canopy/actors/query_key.hpp>
#include <canopy/actors/worker_pool.hpp>
#include <canopy/messages/actor_interfaces.hpp>

#include <caf/actor_clock.hpp>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace canopy::actors {

struct batcher_options {
  backends::model_info served;        // the model workers must serve to join
  std::uint32_t passes_in_flight = 1; // per worker
  cache::row_dtype rows = cache::row_dtype::float32; // the dtype passes return rows in
  std::uint32_t batch_size = 64;
  caf::timespan batch_timeout{std::chrono::milliseconds(2)};
  bool flush_when_idle = true;
  bool merge_duplicates = true;
  plan_options plan;
  caf::timespan pass_timeout{std::chrono::minutes(10)};
  /// How long queries wait for a worker while none is alive (a front whose nodes are
  /// all lost, or not joined yet: worker_timeout_ms); 0: they fail at once.
  caf::timespan rejoin_patience{0};
  /// What the adapters' files kept for joining workers may hold, all together.
  std::uint64_t adapter_budget_bytes = std::uint64_t{1} << 30;
};

using entry_id = std::uint64_t;

/// A caller waiting for an entry: the request actor and its ticket.
struct waiter {
  messages::answer_sink sink;
  std::uint64_t ticket = 0;
};

/// One distinct query key (partition and sequence) and everyone waiting for it.
struct batch_entry {
  messages::query q;
  std::vector<waiter> waiters;
  caf::actor_clock::time_point arrival;
  std::optional<caf::actor_clock::time_point>
      deadline; // latest of the waiters'; none: no limit
  // The sequence's node, on which the entry holds one of its lookups' locks until it
  // leaves (root_node when the cache is off): the prefix cannot be evicted meanwhile.
  cache::node_id leaf = cache::root_node;
  std::vector<cache::node_id> pins; // locks of its last prepare (prepared_entry::pins)
  std::size_t key_hash = 0;         // query_key::hash_of(q)
};

/// A batch between prepare and its answers.
struct running_batch {
  cache::worker_id worker = 0;
  std::uint64_t tokens = 0;           // new tokens of its pass (the worker's load)
  messages::worker_actor handle;      // the worker running it (its slot may change hands)
  std::vector<entry_id> entries;      // answered by this pass
  std::vector<answer_ref> answers;    // [entries]
  std::vector<std::size_t> first_row; // [items + 1] offset of each item's rows in the
                                      // store's answer
  std::vector<entry_id> item_owner;   // [items] the entry whose sequence the item ends
  std::vector<std::uint32_t> item_start; // [items] its KV prefix: it computes past this
  caf::actor_clock::time_point started;  // when the pass was sent (pass_timeout)
  bool returned = false;                 // the pass is back; its results are being stored
  // Until the pass returns; then moved into the store request.
  std::vector<messages::store_item> items;
  backends::pass_request pass;
};

/// A query on the reference path (no cache, no batching, no KV kept).
struct uncached_job {
  cache::token_seq tokens;
  std::uint64_t ticket = 0;
  messages::answer_sink sink;
  cache::worker_id worker = 0; // where it runs now
  std::uint64_t attempt = 0;   // which sending of it an answer belongs to
};

struct batcher_state {
  batcher_options options;
  messages::cache_actor cache;
  std::shared_ptr<engine_metrics> metrics;
  worker_pool workers;

  std::unordered_map<entry_id, batch_entry> entries;
  // When merging: each entry by its key (a view of the entry's own q).
  std::unordered_map<query_key, entry_id, query_key_hash> by_key;
  std::deque<entry_id> pending; // arrival order
  // Entries waiting for a busy worker (Note [routing] in batch_planner.hpp): it holds
  // their KV, or computes a prefix they share; back to the head of `pending` when the
  // worker can take a pass, or is lost.
  struct waiting_entry {
    entry_id id = 0;
    std::uint64_t tokens = 0; // what routing counted it for in the worker's load
  };
  std::map<cache::worker_id, std::vector<waiting_entry>> waiting;
  std::size_t waiting_count = 0;
  std::vector<cache::node_id> unlocks; // locks of entries that left, for the cache
  std::unordered_map<std::uint64_t, running_batch> running;
  std::unordered_map<std::uint64_t, uncached_job> uncached;
  std::uint64_t next_uncached = 0;
  entry_id next_entry = 0;
  std::uint64_t next_batch = 0;
  bool preparing = false;     // one prepare at a time
  earliest_timer flush_timer; // for the first waiting query's window
  earliest_timer pass_watch;  // for the earliest running pass's pass_timeout
  /// Since when no worker is alive while queries wait (rejoin_patience); none: one is.
  std::optional<caf::actor_clock::time_point> workerless_since;
  bool idle_check_queued = false; // an idle_atom is on its way to us
  bool burst_enqueued = false;    // handling that idle_atom
  // Passes' round trip, a moving average (Note [idle gather] in batcher_actor.cpp).
  caf::actor_clock::duration_type recent_pass{};
  // The LoRA adapters loaded, by key, with their files for workers that join later.
  std::map<std::string, backends::lora_adapter_files> adapters;
  std::uint64_t adapter_bytes = 0; // their files' bytes

  static inline const char* name = "canopy.batcher";
};

using batcher_pointer = messages::batcher_actor::stateful_pointer<batcher_state>;

/// Starts with no worker: workers join with (join_atom, handle, description).
messages::batcher_actor::behavior_type batcher(batcher_pointer self,
                                               batcher_options options,
                                               messages::cache_actor cache,
                                               std::shared_ptr<engine_metrics> metrics);

} // namespace canopy::actors
