#pragma once
// Turns a prepared batch into one ragged pass, so that every token is computed once:
//  - an entry whose sequence is a prefix of (or equal to) another entry's folds into
//    that entry's item and is answered from one of its rows;
//  - an entry that shares not-yet-cached tokens with an item of this pass is deferred
//    to the next pass, where those tokens are cached (computing them twice now would
//    waste the work KV reuse saves);
//  - each item starts after the KV prefix the chosen worker holds.
// Entries of different cache partitions never fold, defer or group together: they
// share no tokens (messages::query::partition).
// Also routes the entries of a flush to workers (route_entries).
// Thread contract: pure functions.

#include <canopy/backends/backend.hpp>
#include <canopy/cache/token_trie.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

namespace canopy::actors {

/// One entry of a batch as the planner sees it.
struct plan_entry {
  const cache::token_seq* tokens = nullptr; // the full sequence (non-empty)
  cache::kv_prefix kv;                      // on the chosen worker, capped at length-1
  std::string_view partition{};             // its cache partition (Note [adapter
                                            // scopes]: it names the adapter too)
  std::string_view adapter{};               // the adapter's key its item runs under
};

/// Where an entry's answer comes from.
struct answer_ref {
  static constexpr std::uint32_t deferred = std::numeric_limits<std::uint32_t>::max();
  std::uint32_t item = deferred; // index into pass.items, or `deferred`
  std::uint32_t row = 0;         // index into that item's rows
};

struct batch_plan {
  backends::pass_request pass;
  std::vector<std::uint32_t> item_entry; // [items] the entry whose sequence the item ends
  std::vector<answer_ref> answers;       // [entries]
  std::vector<std::uint32_t> deferred;   // entries to run in a later pass
};

struct plan_options {
  bool rows_at_every_position = true; // compute every new token's row (later prefix
                                      // queries hit), not only the rows asked for
  bool kv_reuse = true;               // false: items compute their whole sequence and
                                      // keep no KV (so deferring would save nothing)
};

batch_plan plan_batch(const std::vector<plan_entry>& entries,
                      const plan_options& options);

/// What route_entries knows of the workers.
struct routing_view {
  std::vector<cache::worker_id> ready;  // may take a pass now
  std::vector<cache::worker_id> active; // serve (ready or busy); draining ones do not
  std::vector<std::uint64_t> load;      // [workers] tokens given to each and not back yet
};

/// One entry of a flush, as routing sees it.
struct routing_entry {
  const cache::token_seq* tokens = nullptr;
  std::vector<cache::kv_prefix> kv;          // [workers, or fewer] its KV prefix on each
  std::optional<cache::worker_id> computing; // a worker whose running pass computes
                                             // tokens of it (cached nowhere yet)
  std::string_view partition{};              // its cache partition
};

/// Where one entry goes.
struct entry_route {
  std::optional<cache::worker_id> worker; // the worker it goes to, or the busy one it
                                          // waits for; none: it waits for any
  bool waits = false;                     // that worker (any) has no room now, or
                                          // first stores tokens of it a pass computes
};

/// A cached prefix this long is worth waiting for (Note [routing]): computing it again
/// on another worker would cost more than a short wait. A shorter one (a BOS token)
/// whose worker is busy is computed again where there is room, so that it does not tie
/// every sequence to one worker: at most reuse_tokens - 1 tokens again per sequence.
inline constexpr std::uint32_t reuse_tokens = 8;

/// Note [routing]: KV stays where it was computed. An entry goes to the active worker
/// holding the longest KV prefix of it (ties: the least loaded) when that worker is
/// ready, or, waiting for it, when the prefix is worth waiting for (reuse_tokens):
/// computing it again elsewhere would spend what KV reuse saves, and make tokens
/// computed exceed the unique ones. An entry sharing tokens a running pass computes
/// waits for that pass's worker, which will hold their KV, as the planner defers an
/// entry sharing uncached tokens with an item of its pass; it waits even when the
/// worker has room for another pass (passes in flight), since only once the results
/// are stored does its prepare see that KV. The other entries
/// go, in families sharing a first token (so that a prefix they share, cached nowhere,
/// is computed once, on one worker), to the least loaded active worker, counting what
/// this routing gives each, waiting if it is busy: where a prompt's KV is made decides
/// where its continuations go, so prompts are spread by the work each worker has in
/// hand, not given all to whichever worker happens to be idle.
std::vector<entry_route> route_entries(const std::vector<routing_entry>& entries,
                                       const routing_view& workers);

/// How many leading tokens `a` and `b` share.
std::uint32_t common_prefix(const cache::token_seq& a, const cache::token_seq& b);

/// Orders sequences by partition, then lexicographically: every prefix comes right
/// before its extensions of the same partition.
bool partition_order(std::string_view partition_a, const cache::token_seq& a,
                     std::string_view partition_b, const cache::token_seq& b);

} // namespace canopy::actors
