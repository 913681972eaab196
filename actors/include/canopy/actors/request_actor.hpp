#pragma once
// A request actor: the engine's front door (the engine_actor interface). It validates
// each query (empty, out-of-range ids, too long, an oversized partition name), gives it a
// ticket, sends it to the cache actor, which answers hits and forwards misses to the
// batcher, and delivers the (answer_atom, ticket, ...) that comes back to the caller's
// response promise or callback, or deadline_exceeded when the query's timeout fires
// first. It remembers every query it has not answered yet, so that shutting down answers
// them all (no caller ever hangs). Queries a sink sent under its own ids can be cancelled
// by those ids; the batcher then withdraws them, so work nobody waits for is not
// computed. Thread contract: the state is touched only by the actor.
//
// Note [answer bursts]: answers are delivered in bursts, newest first. A completed
// answer is held; the first one held sends the actor a flush message, which queues
// behind whatever else arrived meanwhile, and the flush delivers every answer held by
// then. Why: a host holding futures waits on them in the order it asked, and each
// promise fulfilled while the host waits on it costs a futex wake and a context switch.
// Delivered one by one, oldest first, the host woke for nearly every answer (100,000
// futures of cache hits: 154,000 context switches against the callbacks' 7,500, and
// 1.3x their time); newest first, it wakes once per burst (1.1x). Callbacks lose
// nothing. Shutting down delivers what is held before failing what is outstanding.

#include <canopy/actors/earliest_timer.hpp>
#include <canopy/actors/engine_metrics.hpp>
#include <canopy/backends/backend.hpp>
#include <canopy/backends/tokenizers/next_byte.hpp>
#include <canopy/messages/actor_interfaces.hpp>

#include <caf/actor_addr.hpp>
#include <caf/actor_clock.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

namespace canopy::actors {

struct request_options {
  caf::timespan query_timeout{0}; // 0: none
  /// The model's vocabulary in byte order, for next-byte queries; null without a
  /// tokenizer (they are answered errc::no_tokenizer).
  std::shared_ptr<const backends::byte_order> byte_order;
};

/// A query a sink asked for under its own id.
struct caller_key {
  caf::actor_addr sink;
  std::uint64_t id = 0;
  bool operator==(const caller_key& other) const {
    return id == other.id && sink == other.sink;
  }
};

struct caller_key_hash {
  std::size_t operator()(const caller_key& key) const {
    return std::hash<caf::actor_addr>{}(key.sink) ^ (key.id * 0x9E3779B97F4A7C15ULL);
  }
};

struct request_state {
  request_options options;
  backends::model_info model;
  messages::cache_actor cache;
  messages::batcher_actor batcher;
  std::shared_ptr<engine_metrics> metrics;
  /// Deadlines of unanswered queries that have one, earliest first, and the one timer
  /// for the earliest.
  using deadline_map = std::multimap<caf::actor_clock::time_point, std::uint64_t>;
  deadline_map deadlines;
  earliest_timer deadline_timer;
  /// A query not answered yet.
  struct pending {
    std::function<void(caf::expected<messages::shared_logprobs>)> answer;
    caf::actor_clock::time_point accepted;
    std::optional<caller_key> caller;               // when cancellable by the caller's id
    std::optional<deadline_map::iterator> deadline; // its element of `deadlines`
  };
  std::unordered_map<std::uint64_t, pending> outstanding; // by ticket
  /// What a cancellation needs: the ticket, and what the batcher keys it by (its
  /// partition and sequence).
  struct cancellable {
    std::uint64_t ticket = 0;
    messages::query key;
  };
  std::unordered_map<caller_key, cancellable, caller_key_hash> by_caller;
  std::uint64_t next_ticket = 0;
  /// Answers completed and not delivered yet (Note [answer bursts]), oldest first.
  struct held_answer {
    std::function<void(caf::expected<messages::shared_logprobs>)> answer;
    caf::expected<messages::shared_logprobs> result;
  };
  std::vector<held_answer> held;
  /// Next-byte masses this actor made, by the row they were made from, while anyone
  /// holds them: equal next-byte queries answered together (merged into one row) make
  /// them once, not once each, before the cache keeps them. A live entry keeps its row
  /// alive, so no other row can have its address.
  std::unordered_map<const cache::logprob_row*,
                     std::weak_ptr<const backends::byte_masses>>
      made_masses;
  std::size_t made_masses_pruned_at = 0; // its size after the last sweep of dead entries

  static inline const char* name = "canopy.request";
};

using request_pointer = messages::engine_actor::stateful_pointer<request_state>;

messages::engine_actor::behavior_type
request_actor(request_pointer self, request_options options, backends::model_info model,
              messages::cache_actor cache, messages::batcher_actor batcher,
              std::shared_ptr<engine_metrics> metrics);

/// The first problem with a sequence for this model, or none.
caf::error validate_tokens(const cache::token_seq& tokens,
                           const backends::model_info& model);

/// The first problem with a query's scope (its partition, its adapter's name), or none.
caf::error validate_scope(const messages::query& q);

/// The first problem with a query for this model (its tokens, its scope), or none.
caf::error validate_query(const messages::query& q, const backends::model_info& model);

} // namespace canopy::actors
