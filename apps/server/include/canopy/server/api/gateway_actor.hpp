#pragma once
// The gateway: long-lived actors between the HTTP transport and the engine. Each HTTP
// request becomes a job here; the gateway sends its engine queries to the engine's
// front under its own query ids (answers come back as messages, with no response
// handler per query), gathers the answers, and calls the job's `done` once: with
// every row, the sampled tokens, or the first error (the job's other queries are
// then cancelled); next-byte jobs get their distributions. A request whose client went
// away is cancelled by its request id: its queries are cancelled in the engine and `done`
// is never called. A few gateways (one per scheduler thread) share the load; a request
// always goes to the same one. Thread contract: jobs and cancellations are messages (send
// from any thread); `done` runs on a gateway's actor thread, must not block, and owns its
// argument.

#include <canopy/cache/types.hpp>
#include <canopy/messages/actor_interfaces.hpp>
#include <canopy/server/api/row_encoding.hpp>
#include <canopy/server/api/token_score.hpp>
#include <canopy/server/api_error.hpp>
#include <canopy/server/transport/http_message.hpp>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace canopy::server {

using sample_atom = caf::atom_constant<caf::atom("sample")>;
using cache_kv_atom = caf::atom_constant<caf::atom("cache_kv")>;

/// What a job ends with. `engine_ms`: first query sent to last answer received.
struct gateway_reply {
  std::optional<api_error> error;
  std::vector<scored_sequence> answers;    // logprobs jobs: one per sequence
  std::vector<cache::token_seq> generated; // sample jobs: one per prompt
  std::vector<bool> stopped;               // sample jobs: per prompt, ended by an
                                           // EOS id or on_token (not max_tokens)
  std::vector<backends::next_byte_distribution> distributions; // next-byte jobs: per item
  cache::trie_view view;                                       // cache-view jobs
  double engine_ms = 0;
};

using gateway_done = std::function<void(gateway_reply)>;

/// The rows a logprobs job asks the engine for at once; it asks for the next as each
/// comes back (each query carries its whole sequence: this bounds what a job's queries
/// hold, Note [rows in flight] in the source).
inline constexpr std::size_t rows_in_flight_per_job = 64;

/// What one token of a query in flight costs: its copies in the query message, the
/// request actor and the batcher's key (4 bytes each), with room for their vectors'
/// slack and the maps that hold them.
inline constexpr std::size_t query_bytes_per_token = 32;

/// Where a job's queries are cached and computed.
struct query_scope {
  std::string partition; // their cache partition (cache_partition.hpp)
  std::string adapter;   // the LoRA adapter they run under; "": the base model
};

/// A query's scope is copied where its tokens are: it costs as many tokens as it has
/// 4-byte words.
inline std::size_t scope_tokens(const query_scope& scope) {
  const auto bytes = scope.partition.size() + scope.adapter.size();
  return (bytes + sizeof(cache::token_id) - 1) / sizeof(cache::token_id);
}

/// Next-token rows after each sequence, or after every prefix (all_positions).
struct logprobs_job {
  std::vector<cache::token_seq> sequences;
  bool all_positions = false;
  std::int32_t priority = 0;
  double deadline_ms = 0; // 0: the engine's query_timeout_ms
  query_scope scope;
  gateway_done done;
};

/// Next-byte distributions after each item's tokens and prefix (at most
/// rows_in_flight_per_job asked at once, as a logprobs job's rows).
struct next_byte_job {
  // Shared with the answer, which echoes them: one copy of every item's tokens.
  std::shared_ptr<const std::vector<next_byte_item>> items;
  backends::byte_reduce reduce = backends::byte_reduce::sum;
  std::int32_t priority = 0;
  double deadline_ms = 0; // 0: the engine's query_timeout_ms
  query_scope scope;
  gateway_done done;
};

/// A token a sample job generated, as on_token sees it.
struct sampled_token {
  std::size_t prompt = 0;
  std::int32_t id = 0;
  const token_score* score = nullptr; // with top_logprobs
  bool last = false;    // the prompt generates no more: an EOS id or max_tokens
  bool stopped = false; // ... an EOS id
};

/// engine::batch_sample, stepped by messages (the same tokens for the same seed).
struct sample_job {
  std::vector<cache::token_seq> prompts;
  std::size_t max_tokens = 0;
  std::vector<std::int32_t> eos_token_ids;
  double temperature = 1.0;
  std::uint64_t seed = 0;
  double top_p = 1.0;
  /// Scores each generated token with this many alternatives (sampled_token::score).
  std::optional<std::size_t> top_logprobs;
  /// Called after each generated token, as it comes (streaming): true ends that
  /// prompt's generation as stopped (a stop string appeared). Runs on the gateway's
  /// thread; must not block.
  std::function<bool(const sampled_token&)> on_token;
  query_scope scope;
  gateway_done done;
};

/// engine::cache_kv: done once the prompt's KV is cached.
struct cache_kv_job {
  cache::token_seq prompt;
  query_scope scope;
  gateway_done done;
};

/// engine::cache_view: the node of `prefix` in the scope and those below it.
struct view_job {
  cache::token_seq prefix;
  query_scope scope;
  cache::trie_view_limits limits;
  gateway_done done;
};

/// engine::clear_cache, or clear_kv_cache when kv_only, of the partitions whose names
/// start with `partitions`.
struct clear_job {
  bool kv_only = false;
  std::string partitions;
  gateway_done done;
};

using gateway_actor = messages::answer_sink::extend<
    // A next-byte answer (the gateway is a messages::next_byte_sink too).
    caf::reacts_to<messages::answer_atom, std::uint64_t,
                   backends::next_byte_distribution>,
    // Runs a job for HTTP request `id`.
    caf::reacts_to<messages::logprobs_atom, request_id, logprobs_job>,
    caf::reacts_to<messages::next_byte_atom, request_id, next_byte_job>,
    caf::reacts_to<sample_atom, request_id, sample_job>,
    caf::reacts_to<cache_kv_atom, request_id, cache_kv_job>,
    caf::reacts_to<messages::clear_atom, clear_job>,
    caf::reacts_to<messages::view_atom, view_job>,
    // Request `id`'s client went away: cancel its queries; its done is not called.
    caf::reacts_to<messages::cancel_atom, request_id>>;

/// Spawns a gateway that sends queries to `engine` (a front's typed handle).
gateway_actor spawn_gateway(caf::actor_system& system, messages::engine_actor engine);

} // namespace canopy::server

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(canopy::server::logprobs_job)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(canopy::server::next_byte_job)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(canopy::server::sample_job)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(canopy::server::cache_kv_job)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(canopy::server::clear_job)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(canopy::server::view_job)
