#pragma once
// Turns a prepared batch into one ragged pass, so that every token is computed once:
//  - an entry whose sequence is a prefix of (or equal to) another entry's folds into
//    that entry's item and is answered from one of its rows;
//  - an entry that shares not-yet-cached tokens with an item of this pass is deferred
//    to the next pass, where those tokens are cached (computing them twice now would
//    waste the work KV reuse saves);
//  - each item starts after the KV prefix the chosen worker holds.
// Also chooses the worker: the one holding KV for the longest prefix of most entries,
// else the least loaded.
// Thread contract: pure functions.

#include <canopy/backends/backend.hpp>
#include <canopy/cache/token_trie.hpp>

#include <cstdint>
#include <limits>
#include <vector>

namespace canopy::actors {

/// One entry of a batch as the planner sees it.
struct plan_entry {
  const cache::token_seq* tokens = nullptr; // the full sequence (non-empty)
  cache::kv_prefix kv;                      // on the chosen worker, capped at length-1
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

batch_plan plan_batch(const std::vector<plan_entry>& entries, const plan_options& options);

/// Chooses among `candidates` (non-empty): the worker that holds the longest KV prefix
/// for the most entries; when no candidate holds any, the one with the least `load`
/// (ties: lowest id). kv[e][w] is entry e's KV prefix on worker w.
cache::worker_id choose_worker(const std::vector<std::vector<cache::kv_prefix>>& kv,
                               const std::vector<cache::worker_id>& candidates,
                               const std::vector<std::uint64_t>& load);

} // namespace canopy::actors
