#include <canopy/actors/request_actor.hpp>

#include <canopy/messages/errors.hpp>

namespace canopy::actors {

using namespace messages;

caf::error validate_tokens(const cache::token_seq& tokens,
                           const backends::model_info& model) {
  if (tokens.empty())
    return make_error(errc::empty_sequence, "the token list is empty");
  if (static_cast<std::int64_t>(tokens.size()) > model.context_length)
    return make_error(errc::sequence_too_long,
                      "sequence of " + std::to_string(tokens.size()) +
                          " tokens exceeds the model's context of " +
                          std::to_string(model.context_length));
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= model.vocab_size)
      return make_error(errc::token_out_of_range,
                        "token id " + std::to_string(tokens[i]) + " at position " +
                            std::to_string(i) + " is outside [0, " +
                            std::to_string(model.vocab_size) + ")");
  return caf::none;
}

caf::error validate_scope(const query& q) {
  if (q.partition.size() > max_partition_bytes)
    return make_error(errc::invalid_request, "the cache partition has " +
                                                 std::to_string(q.partition.size()) +
                                                 " bytes, more than the limit of " +
                                                 std::to_string(max_partition_bytes));
  // Note [adapter scopes] (cache_actor.cpp): NUL separates a partition from its adapter.
  if (q.partition.find('\0') != std::string::npos)
    return make_error(errc::invalid_request, "the cache partition holds a NUL byte");
  if (q.adapter.size() > max_adapter_name_bytes)
    return make_error(errc::invalid_request, "the adapter name has " +
                                                 std::to_string(q.adapter.size()) +
                                                 " bytes, more than the limit of " +
                                                 std::to_string(max_adapter_name_bytes));
  return caf::none;
}

caf::error validate_query(const query& q, const backends::model_info& model) {
  if (auto problem = validate_scope(q))
    return problem;
  return validate_tokens(q.tokens, model);
}

namespace {

using answer_fn = std::function<void(caf::expected<shared_logprobs>)>;

void count_failure(engine_metrics& metrics, const caf::error& e) {
  bump(metrics.failed);
  metrics.count_error(code_of(e));
}

/// Registers an accepted query and returns its ticket.
std::uint64_t accept(request_pointer self, std::size_t tokens, answer_fn answer) {
  auto& st = self->state;
  bump(st.metrics->queries);
  bump(st.metrics->tokens_requested, tokens);
  auto ticket = st.next_ticket++;
  st.outstanding.emplace(
      ticket, request_state::pending{std::move(answer), self->clock().now(), {}, {}});
  return ticket;
}

/// Delivers ticket's answer exactly once (later answers for it are ignored).
void complete(request_pointer self, std::uint64_t ticket,
              caf::expected<shared_logprobs> result) {
  auto& st = self->state;
  auto it = st.outstanding.find(ticket);
  if (it == st.outstanding.end())
    return;
  auto pending = std::move(it->second);
  st.outstanding.erase(it);
  if (pending.caller)
    st.by_caller.erase(*pending.caller);
  if (pending.deadline)
    st.deadlines.erase(*pending.deadline);
  if (result)
    bump(st.metrics->answered);
  else
    count_failure(*st.metrics, result.error());
  auto latency = self->clock().now() - pending.accepted;
  st.metrics->latency.record(latency);
  st.metrics->latency_seconds.observe(std::chrono::duration<double>(latency).count());
  if (st.held.empty())
    self->send(self, flush_atom::value);
  st.held.push_back({std::move(pending.answer), std::move(result)});
}

/// Delivers the answers held (Note [answer bursts]), newest first.
void deliver_held(request_pointer self) {
  auto held = std::move(self->state.held);
  self->state.held.clear();
  for (auto it = held.rbegin(); it != held.rend(); ++it)
    it->answer(std::move(it->result));
}

/// Rejects a query before it enters the pipeline.
void reject(request_pointer self, const caf::error& e, const answer_fn& answer) {
  bump(self->state.metrics->queries);
  count_failure(*self->state.metrics, e);
  answer(e);
}

void arm_deadline_timer(request_pointer self) {
  auto& st = self->state;
  if (!st.deadlines.empty())
    st.deadline_timer.arm(self, st.deadlines.begin()->first, timeout_atom::value);
}

/// A timer fired: answers every query whose deadline passed, and arms the next timer.
void on_deadline_timer(request_pointer self) {
  auto& st = self->state;
  const auto now = self->clock().now();
  st.deadline_timer.fired(now);
  while (!st.deadlines.empty() && st.deadlines.begin()->first <= now) {
    const auto ticket = st.deadlines.begin()->second;
    st.outstanding.at(ticket).deadline.reset();
    st.deadlines.erase(st.deadlines.begin());
    complete(
        self, ticket,
        make_error(errc::deadline_exceeded, "no answer within the query's deadline"));
  }
  arm_deadline_timer(self);
}

void ask(request_pointer self, query q, answer_fn answer,
         std::optional<caller_key> caller = std::nullopt) {
  auto& st = self->state;
  if (auto e = validate_query(q, st.model))
    return reject(self, e, answer);
  if (q.timeout.count() == 0)
    q.timeout = st.options.query_timeout;
  auto ticket = accept(self, q.tokens.size(), std::move(answer));
  if (caller) {
    st.outstanding.at(ticket).caller = caller;
    query key;
    key.tokens = q.tokens;
    key.partition = q.partition;
    key.adapter = q.adapter;
    st.by_caller.emplace(std::move(*caller),
                         request_state::cancellable{ticket, std::move(key)});
  }
  if (q.timeout.count() > 0) {
    st.outstanding.at(ticket).deadline =
        st.deadlines.emplace(self->clock().now() + q.timeout, ticket);
    arm_deadline_timer(self);
  }
  self->send(st.cache, lookup_atom::value, std::move(q), ticket,
             caf::actor_cast<answer_sink>(self));
}

void ask_uncached(request_pointer self, const cache::token_seq& tokens,
                  answer_fn answer) {
  auto& st = self->state;
  if (auto e = validate_tokens(tokens, st.model))
    return reject(self, e, answer);
  auto ticket = accept(self, tokens.size(), std::move(answer));
  // The batcher knows which workers are there; it answers the ticket.
  self->send(st.batcher, uncached_atom::value, tokens, ticket,
             caf::actor_cast<answer_sink>(self));
}

using next_byte_fn = std::function<void(caf::expected<backends::next_byte_distribution>)>;

/// Masses of a row this actor made and someone still holds, or null.
std::shared_ptr<const backends::byte_masses> made_masses_of(request_pointer self,
                                                            const cache::row_ptr& row) {
  auto& made = self->state.made_masses;
  const auto it = made.find(row.get());
  return it == made.end() ? nullptr : it->second.lock();
}

/// Remembers masses made for `row`; sweeps the dead entries whenever the map has doubled
/// since the last sweep, so it holds about as many entries as masses are alive.
void remember_masses(request_pointer self, const cache::row_ptr& row,
                     const std::shared_ptr<const backends::byte_masses>& masses) {
  auto& st = self->state;
  st.made_masses[row.get()] = masses;
  if (st.made_masses.size() < 2 * st.made_masses_pruned_at + 16)
    return;
  for (auto it = st.made_masses.begin(); it != st.made_masses.end();)
    it = it->second.expired() ? st.made_masses.erase(it) : std::next(it);
  st.made_masses_pruned_at = st.made_masses.size();
}

/// A next-byte query: its sequence's row, found or computed as a query's, and then the
/// distribution from the masses beside it. A row that came without masses gets them
/// made here (request actors share that work; the cache actor only keeps them) and
/// sent to the cache to be kept beside it (Note [masses beside rows] in next_byte.hpp).
void ask_next_byte(request_pointer self, next_byte_query nq, next_byte_fn answer,
                   std::optional<caller_key> caller = std::nullopt) {
  auto& st = self->state;
  bump(st.metrics->next_byte_queries);
  auto order = st.options.byte_order;
  // The key is copied: the masses are kept by the sequence's partition and adapter.
  query kept;
  kept.tokens = nq.tokens.tokens;
  kept.partition = nq.tokens.partition;
  kept.adapter = nq.tokens.adapter;
  answer_fn on_row = [self, order, prefix = std::move(nq.prefix), reduce = nq.reduce,
                      kept = std::move(kept),
                      answer = std::move(answer)](caf::expected<shared_logprobs> row) {
    if (!row)
      return answer(row.error());
    auto masses = std::dynamic_pointer_cast<const backends::byte_masses>(row->extra);
    if (!masses)
      masses = made_masses_of(self, row->row);
    if (!masses) {
      try {
        masses = std::make_shared<const backends::byte_masses>(order, row->row);
      } catch (const std::invalid_argument& e) { // a row that does not fit the order
        return answer(make_error(errc::backend_failure, e.what()));
      }
      bump(self->state.metrics->next_byte_masses_made);
      remember_masses(self, row->row, masses);
      self->send(self->state.cache, keep_atom::value, kept,
                 shared_logprobs{row->row, masses});
    }
    answer(masses->next_byte(prefix, reduce));
  };
  if (!order)
    return reject(self,
                  make_error(errc::no_tokenizer, "the model " + st.model.name +
                                                     " has no tokenizer: next-byte "
                                                     "queries need its token bytes"),
                  on_row);
  ask(self, std::move(nq.tokens), std::move(on_row), std::move(caller));
}

/// Adapts a response promise to an answer function.
template <class T>
std::function<void(caf::expected<T>)> to_promise(caf::typed_response_promise<T> promise) {
  return [promise](caf::expected<T> result) mutable {
    if (result)
      promise.deliver(std::move(*result));
    else
      promise.deliver(std::move(result.error()));
  };
}

/// Answers (answer_atom, id, ...) to a sink.
template <class T, class Sink>
std::function<void(caf::expected<T>)> to_sink(request_pointer self, Sink sink,
                                              std::uint64_t id) {
  return [self, sink = std::move(sink), id](caf::expected<T> result) {
    if (result)
      self->send(sink, answer_atom::value, id, std::move(*result));
    else
      self->send(sink, answer_atom::value, id, std::move(result.error()));
  };
}

void cancel_for(request_pointer self, const caf::actor_addr& sink,
                const std::vector<std::uint64_t>& ids) {
  auto& st = self->state;
  std::vector<std::uint64_t> tickets;
  std::vector<query> keys;
  for (auto id : ids) {
    auto it = st.by_caller.find(caller_key{sink, id});
    if (it == st.by_caller.end())
      continue; // answered already
    tickets.push_back(it->second.ticket);
    keys.push_back(std::move(it->second.key));
    complete(self, tickets.back(),
             make_error(errc::cancelled, "the caller cancelled the query"));
  }
  // Through the cache, the path the queries took, so the batcher sees the withdrawal
  // after the queries themselves.
  if (!tickets.empty())
    self->send(st.cache, cancel_atom::value, caf::actor_cast<answer_sink>(self),
               std::move(tickets), std::move(keys));
}

} // namespace

engine_actor::behavior_type request_actor(request_pointer self, request_options options,
                                          backends::model_info model, cache_actor cache,
                                          batcher_actor batcher,
                                          std::shared_ptr<engine_metrics> metrics) {
  auto& st = self->state;
  st.options = options;
  st.model = std::move(model);
  st.cache = std::move(cache);
  st.batcher = std::move(batcher);
  st.metrics = std::move(metrics);
  self->set_exit_handler([=](caf::exit_msg& msg) {
    deliver_held(self);
    auto pending = std::move(self->state.outstanding);
    self->state.outstanding.clear();
    for (auto& [ticket, p] : pending)
      p.answer(make_error(errc::shutting_down, "the engine stopped before answering"));
    self->quit(msg.reason);
  });
  return {
      [=](answer_atom, std::uint64_t ticket, const shared_logprobs& row) {
        complete(self, ticket, row);
      },
      [=](answer_atom, std::uint64_t ticket, const caf::error& e) {
        complete(self, ticket, e);
      },
      [=](answer_atom, const answer_batch& batch) {
        for (std::size_t i = 0; i < batch.tickets.size(); ++i)
          complete(self, batch.tickets[i], batch.rows[i]);
      },
      [=](timeout_atom) { on_deadline_timer(self); },
      [=](flush_atom) { deliver_held(self); },
      [=](logprobs_atom, const cache::token_seq& tokens) {
        auto promise = self->make_response_promise<shared_logprobs>();
        ask(self, query{tokens}, to_promise(promise));
        return promise;
      },
      [=](logprobs_atom, const query& q) {
        auto promise = self->make_response_promise<shared_logprobs>();
        ask(self, q, to_promise(promise));
        return promise;
      },
      // Taken by mutable reference and moved from: the message is ours alone (sent, not
      // shared), so neither the tokens nor the callback are copied.
      [=](logprobs_atom, query& q, reply_callback& callback) {
        ask(self, std::move(q), std::move(callback.fn));
      },
      [=](logprobs_atom, query& q, std::uint64_t id, const answer_sink& sink) {
        ask(self, std::move(q), to_sink<shared_logprobs>(self, sink, id),
            caller_key{sink.address(), id});
      },
      [=](next_byte_atom, next_byte_query& q) {
        auto promise = self->make_response_promise<backends::next_byte_distribution>();
        ask_next_byte(self, std::move(q), to_promise(promise));
        return promise;
      },
      [=](next_byte_atom, next_byte_query& q, next_byte_reply& callback) {
        ask_next_byte(self, std::move(q), std::move(callback.fn));
      },
      [=](next_byte_atom, next_byte_query& q, std::uint64_t id,
          const next_byte_sink& sink) {
        ask_next_byte(self, std::move(q),
                      to_sink<backends::next_byte_distribution>(self, sink, id),
                      caller_key{sink.address(), id});
      },
      [=](cancel_atom, const answer_sink& sink, const std::vector<std::uint64_t>& ids) {
        cancel_for(self, sink.address(), ids);
      },
      [=](cancel_atom, const next_byte_sink& sink,
          const std::vector<std::uint64_t>& ids) {
        cancel_for(self, sink.address(), ids);
      },
      [=](uncached_atom, const cache::token_seq& tokens) {
        auto promise = self->make_response_promise<shared_logprobs>();
        ask_uncached(self, tokens, to_promise(promise));
        return promise;
      },
      [=](uncached_atom, const cache::token_seq& tokens, reply_callback& callback) {
        ask_uncached(self, tokens, std::move(callback.fn));
      },
      [=](clear_atom, std::string& partitions) {
        return self->delegate(self->state.cache, clear_atom::value,
                              std::move(partitions));
      },
      [=](clear_kv_atom, std::string& partitions) {
        return self->delegate(self->state.cache, clear_kv_atom::value,
                              std::move(partitions));
      },
      [=](view_atom, query& q,
          const cache::trie_view_limits& limits) -> caf::result<cache::trie_view> {
        // The root's view asks for no token: only a prefix given is checked as one.
        auto problem =
            q.tokens.empty() ? validate_scope(q) : validate_query(q, self->state.model);
        if (problem)
          return problem;
        return self->delegate(self->state.cache, view_atom::value, std::move(q), limits);
      },
      [=](cancel_atom) {
        return self->delegate(self->state.batcher, cancel_atom::value);
      },
      [=](info_atom) { return self->state.model; },
  };
}

} // namespace canopy::actors
