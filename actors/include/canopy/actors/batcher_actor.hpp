#pragma once
// The batcher actor. Misses arrive from the cache actor; a query whose FULL sequence
// equals one already waiting or in flight joins it (never a suffix key: equal
// suffixes under different prefixes are different queries). A batch leaves when it
// reaches batch_size, when batch_timeout has passed since its FIRST waiting query,
// or at once when a worker is idle and flush_when_idle is set; each worker runs one
// batch at a time, and the next batch's prepare follows the previous batch's store
// into the cache's mailbox, so every batch is prepared against a cache that holds the
// results of the batch before it. Each entry holds a lock, taken by the cache at
// lookup, on its sequence's node until it leaves. Per batch: the cache reports hits
// and KV prefixes (prepare), the planner folds prefixes and picks the worker, the
// worker runs the pass, the cache stores the results (store), and every waiter gets
// its row. A failed pass, a dead worker, a cancellation, an expired deadline or
// shutdown reaches every waiter as an error.
// Thread contract: the state is touched only by the actor.

#include <canopy/actors/batch_planner.hpp>
#include <canopy/actors/earliest_timer.hpp>
#include <canopy/actors/engine_metrics.hpp>
#include <canopy/actors/token_seq_hash.hpp>
#include <canopy/messages/actor_interfaces.hpp>

#include <caf/actor_clock.hpp>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

namespace canopy::actors {

struct batcher_options {
  std::uint32_t batch_size = 64;
  caf::timespan batch_timeout{std::chrono::milliseconds(2)};
  bool flush_when_idle = true;
  bool merge_duplicates = true;
  plan_options plan;
  caf::timespan pass_timeout{std::chrono::minutes(10)};
};

using entry_id = std::uint64_t;

/// A caller waiting for an entry: the request actor and its ticket.
struct waiter {
  messages::answer_sink sink;
  std::uint64_t ticket = 0;
};

/// One distinct sequence and everyone waiting for it.
struct batch_entry {
  messages::query q;
  std::vector<waiter> waiters;
  caf::actor_clock::time_point arrival;
  std::optional<caf::actor_clock::time_point> deadline; // latest of the waiters'; none: no limit
  // The sequence's node, on which the entry holds one of its lookups' locks until it
  // leaves (root_node when the cache is off): the prefix cannot be evicted meanwhile.
  cache::node_id leaf = cache::root_node;
  std::size_t key_hash = 0; // token_view::hash_of(q.tokens)
};

/// A batch between prepare and its answers.
struct running_batch {
  cache::worker_id worker = 0;
  std::vector<entry_id> entries;        // answered by this pass
  std::vector<answer_ref> answers;      // [entries]
  std::vector<std::size_t> first_row;   // [items + 1] offset of each item's rows in the
                                        // store's answer
  caf::actor_clock::time_point started; // when the pass was sent (pass_timeout)
  bool returned = false;                // the pass is back; its results are being stored
  // Until the pass returns; then moved into the store request.
  std::vector<messages::store_item> items;
  backends::pass_request pass;
};

struct worker_slot {
  messages::worker_actor handle;
  bool alive = true;
  std::optional<std::uint64_t> batch;   // the running batch, if any
  std::uint64_t load = 0;               // tokens computed so far (least-loaded routing)
};

struct batcher_state {
  batcher_options options;
  messages::cache_actor cache;
  std::shared_ptr<engine_metrics> metrics;
  std::vector<worker_slot> workers;

  std::unordered_map<entry_id, batch_entry> entries;
  // When merging: each entry by its sequence (a view of the entry's own q.tokens).
  std::unordered_map<token_view, entry_id, token_seq_hash> by_key;
  std::deque<entry_id> pending;          // arrival order
  std::vector<cache::node_id> unlocks;   // locks of entries that left, for the cache
  std::unordered_map<std::uint64_t, running_batch> running;
  entry_id next_entry = 0;
  std::uint64_t next_batch = 0;
  bool preparing = false;                // one prepare at a time
  earliest_timer flush_timer;            // for the first waiting query's window
  earliest_timer pass_watch;             // for the earliest running pass's pass_timeout
  bool idle_check_queued = false;      // an idle_atom is on its way to us
  bool burst_enqueued = false;         // handling that idle_atom

  static inline const char* name = "canopy.batcher";
};

using batcher_pointer = messages::batcher_actor::stateful_pointer<batcher_state>;

messages::batcher_actor::behavior_type
batcher(batcher_pointer self, batcher_options options, messages::cache_actor cache,
        std::vector<messages::worker_actor> workers, std::shared_ptr<engine_metrics> metrics);

} // namespace canopy::actors
