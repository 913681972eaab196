#pragma once
// What the batcher and the cache actor exchange around one batch: the batcher asks
// the cache how the batch's sequences stand (prepare; their nodes are locked since
// their lookups), runs the pass, and hands the results back for storing (store).
// Thread contract: plain values.

#include <canopy/backends/backend.hpp>
#include <canopy/cache/token_trie.hpp>
#include <canopy/messages/computed_pass.hpp>
#include <canopy/messages/pass_messages.hpp>
#include <canopy/messages/shared_logprobs.hpp>

#include <caf/meta/type_name.hpp>

#include <cstdint>
#include <vector>

namespace canopy::messages {

struct prepare_request {
  std::vector<cache::node_id> leaves; // one per batch entry: its sequence's locked node
  std::vector<bool> require_kv;       // [leaves]
};

/// How one sequence stands in the cache.
struct prepared_entry {
  shared_logprobs hit;              // set when already answerable: nothing to compute
  std::vector<cache::kv_prefix> kv; // [workers] KV prefix, capped at length - 1
  std::vector<cache::node_id> pins; // nodes the prepare locked so that the KV a pass
                                    // reads stays (sliding windows; Note [windowed
                                    // KV]); unlocked with the sequence's node
};

struct prepared_batch {
  std::vector<prepared_entry> entries; // [leaves]
};

/// One pass item's results, to attach along the locked path ending at `leaf`.
struct store_item {
  cache::node_id leaf = 0; // node of the item's last token (locked)
};

struct store_request {
  cache::worker_id worker = 0;
  std::vector<store_item> items; // [pass items]
  backends::pass_request pass;   // what was asked (tokens, rows)
  computed_pass result;          // what came back (KV handles, rows)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prepare_request& x) {
  return f(caf::meta::type_name("prepare_request"), x.leaves, x.require_kv);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prepared_entry& x) {
  return f(caf::meta::type_name("prepared_entry"), x.hit, x.kv, x.pins);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prepared_batch& x) {
  return f(caf::meta::type_name("prepared_batch"), x.entries);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, store_item& x) {
  return f(caf::meta::type_name("store_item"), x.leaf);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, store_request& x) {
  return f(caf::meta::type_name("store_request"), x.worker, x.items, x.pass, x.result);
}

} // namespace canopy::messages
