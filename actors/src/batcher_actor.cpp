#include <canopy/actors/batcher_actor.hpp>

#include "batcher_internals.hpp"

#include <canopy/actors/pass_check.hpp>

#include <canopy/messages/errors.hpp>

#include <caf/sec.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

namespace canopy::actors {

using namespace messages;

namespace batcher_detail {

namespace {

using clock_point = caf::actor_clock::time_point;

clock_point now(batcher_pointer self) { return self->clock().now(); }

/// Gives a lookup's lock on `leaf` back to the cache (with the others of this message).
void unlock_later(batcher_state& st, cache::node_id leaf) {
  if (leaf != cache::root_node)
    st.unlocks.push_back(leaf);
}

/// Forgets an entry and returns who waits for it.
std::vector<waiter> take_waiters(batcher_pointer self, entry_id id) {
  auto& st = self->state;
  auto it = st.entries.find(id);
  if (it == st.entries.end())
    return {};
  auto waiters = std::move(it->second.waiters);
  if (st.options.merge_duplicates)
    st.by_key.erase(token_view(it->second.q.tokens, it->second.key_hash));
  unlock_later(st, it->second.leaf);
  st.entries.erase(it);
  return waiters;
}

/// Answers every waiter of an entry and forgets it.
template <class Answer>
void finish(batcher_pointer self, entry_id id, const Answer& answer) {
  for (const auto& w : take_waiters(self, id))
    self->send(w.sink, answer_atom::value, w.ticket, answer);
}

/// When the batch window of the first waiting query closes.
clock_point window_end(const batcher_state& st) {
  return st.entries.at(st.pending.front()).arrival + st.options.batch_timeout;
}

/// Arms the flush timer for the first waiting query's window, unless a timer armed
/// already fires by then or the window is over (its batch then leaves as soon as a
/// worker is free). Windows only move later as queries leave, so one timer usually
/// serves several batches: it fires, and the next one is armed for the window open then.
void arm_timer(batcher_pointer self) {
  auto& st = self->state;
  if (st.pending.empty())
    return;
  const auto due = window_end(st);
  if (due > now(self))
    st.flush_timer.arm(self, due, flush_atom::value);
}

/// True (and the entry answered and forgotten) when nobody waits for it any more:
/// its waiters were cancelled or their deadlines passed. Checked when an entry leaves
/// the queue, so a flush costs O(batch), not O(queue).
bool drop_if_abandoned(batcher_pointer self, entry_id id) {
  auto& entry = self->state.entries.at(id);
  if (entry.waiters.empty() || (entry.deadline && *entry.deadline <= now(self))) {
    finish(self, id, make_error(errc::deadline_exceeded, "the query's deadline passed "
                                                         "before it reached a worker"));
    return true;
  }
  return false;
}

/// The worker is free of this batch: it may take another.
void release_worker(batcher_pointer self, const running_batch& batch, std::uint64_t batch_id) {
  auto& slot = self->state.workers[batch.worker];
  auto& batches = slot.batches;
  batches.erase(std::remove(batches.begin(), batches.end(), batch_id), batches.end());
  slot.load -= std::min(slot.load, batch.tokens);
  self->state.metrics->worker(batch.worker).in_flight.store(batches.size(),
                                                            std::memory_order_relaxed);
  wake_waiting(self, batch.worker);
}

void finish_batch(batcher_pointer self, std::uint64_t batch_id) {
  auto& st = self->state;
  auto it = st.running.find(batch_id);
  if (it == st.running.end())
    return;
  const auto worker = it->second.worker;
  if (!it->second.returned)
    release_worker(self, it->second, batch_id);
  st.running.erase(it);
  // Entries that waited for these results (running_computation) can be prepared now.
  wake_waiting(self, worker);
}

void fail_batch(batcher_pointer self, std::uint64_t batch_id, const caf::error& error) {
  auto& st = self->state;
  auto it = st.running.find(batch_id);
  if (it == st.running.end())
    return; // already failed (e.g. its worker died first)
  bump(st.metrics->failed_passes);
  for (auto id : it->second.entries)
    finish(self, id, error);
  finish_batch(self, batch_id);
}

void on_stored(batcher_pointer self, std::uint64_t batch_id,
               const std::vector<shared_logprobs>& rows) {
  auto& st = self->state;
  auto it = st.running.find(batch_id);
  if (it == st.running.end())
    return;
  auto& batch = it->second;
  // One message per request actor for the whole batch, not one per query.
  std::unordered_map<caf::actor_addr, std::pair<answer_sink, answer_batch>> answers;
  for (std::size_t e = 0; e < batch.entries.size(); ++e) {
    const auto& ref = batch.answers[e];
    const auto& row = rows.at(batch.first_row[ref.item] + ref.row);
    for (auto& w : take_waiters(self, batch.entries[e])) {
      auto& [sink, out] = answers[w.sink.address()];
      sink = std::move(w.sink);
      out.tickets.push_back(w.ticket);
      out.rows.push_back(row);
    }
  }
  for (auto& [address, answer] : answers)
    self->send(answer.first, answer_atom::value, std::move(answer.second));
  finish_batch(self, batch_id);
}

void on_pass_done(batcher_pointer self, std::uint64_t batch_id, const worker_actor& worker,
                  computed_pass& result) {
  auto& st = self->state;
  auto it = st.running.find(batch_id);
  if (it == st.running.end()) {
    // The batch failed or went to another worker meanwhile (its waiters are taken
    // care of): nobody will store this KV, so the worker that made it must free it.
    // Its slot may belong to another worker by now, hence the handle of the pass.
    std::vector<cache::kv_handle> unused;
    for (const auto& item : result.items)
      for (auto kv : item.kv)
        if (kv != cache::no_kv)
          unused.push_back(kv);
    if (!unused.empty())
      self->send(worker, free_kv_atom::value, std::move(unused));
    return;
  }
  auto& batch = it->second;
  if (auto problem = computed_pass_problem(batch.pass, result, st.options.served.vocab_size);
      !problem.empty()) {
    fail_batch(self, batch_id, make_error(errc::backend_failure,
                                          "worker " + std::to_string(batch.worker) +
                                            " answered a pass that does not fit: " + problem));
    return;
  }
  st.metrics->count_pass(batch.worker, result.tokens_computed, result.matmul_flops,
                         result.compute_ns);
  st.metrics->pass_round_trip.record(now(self) - batch.started);
  batch.returned = true;
  store_request request{batch.worker, std::move(batch.items), std::move(batch.pass),
                        std::move(result)};
  self->request(st.cache, caf::infinite, store_atom::value, std::move(request))
    .then(
      [=](const std::vector<shared_logprobs>& rows) {
        on_stored(self, batch_id, rows);
        maybe_flush(self);
      },
      [=](const caf::error& e) {
        fail_batch(self, batch_id, e);
        maybe_flush(self);
      });
  // The worker is free now. The next batch's prepare reaches the cache after this
  // store (messages from one sender arrive in order), so it still sees these results.
  release_worker(self, st.running.at(batch_id), batch_id);
  maybe_flush(self);
}

/// Arms the pass watchdog for the earliest pass still running. Passes are timed by
/// our own timer, not by their requests': CAF drops a reply that comes after its
/// request timed out, and the KV such a late pass made must still be freed.
void watch_passes(batcher_pointer self) {
  auto& st = self->state;
  std::optional<clock_point> earliest;
  for (const auto& [id, batch] : st.running)
    if (!batch.returned && (!earliest || batch.started < *earliest))
      earliest = batch.started;
  if (earliest)
    st.pass_watch.arm(self, *earliest + st.options.pass_timeout, timeout_atom::value);
}

/// The watchdog's turn: fails every batch whose pass outlived pass_timeout.
void on_pass_watch(batcher_pointer self) {
  auto& st = self->state;
  st.pass_watch.fired(now(self));
  std::vector<std::uint64_t> overdue;
  for (const auto& [id, batch] : st.running)
    if (!batch.returned && batch.started + st.options.pass_timeout <= now(self))
      overdue.push_back(id);
  for (auto id : overdue)
    fail_batch(self, id, make_error(errc::backend_failure, "the pass exceeded pass_timeout_ms"));
  watch_passes(self);
  maybe_flush(self);
}

/// Plans the pass of `ids` (entries routed to `worker`, with their prepared states) and
/// sends it. Returns the entries the planner deferred to a later pass.
std::vector<entry_id> start_batch(batcher_pointer self, cache::worker_id worker,
                                  const std::vector<entry_id>& ids,
                                  const std::vector<const prepared_entry*>& prepared) {
  auto& st = self->state;
  std::vector<plan_entry> plan_entries;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    // A worker that joined after the prepare has no KV in it yet.
    const auto& prefixes = prepared[i]->kv;
    plan_entries.push_back({&st.entries.at(ids[i]).q.tokens,
                            worker < prefixes.size() ? prefixes[worker] : cache::kv_prefix{}});
  }
  auto plan = plan_batch(plan_entries, st.options.plan);

  running_batch batch;
  batch.worker = worker;
  batch.handle = st.workers[worker].handle;
  std::vector<entry_id> deferred;
  for (auto d : plan.deferred)
    deferred.push_back(ids[d]);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (plan.answers[i].item == answer_ref::deferred)
      continue;
    batch.entries.push_back(ids[i]);
    batch.answers.push_back(plan.answers[i]);
  }
  for (std::size_t item = 0; item < plan.pass.items.size(); ++item) {
    batch.items.push_back({st.entries.at(ids[plan.item_entry[item]]).leaf});
    batch.item_owner.push_back(ids[plan.item_entry[item]]);
    batch.item_start.push_back(plan.pass.items[item].prefix_length);
  }
  batch.pass = std::move(plan.pass);
  batch.first_row.assign(batch.pass.items.size() + 1, 0);
  for (std::size_t i = 0; i < batch.pass.items.size(); ++i) {
    batch.first_row[i + 1] = batch.first_row[i] + batch.pass.items[i].rows.size();
    batch.tokens += batch.pass.items[i].tokens.size();
  }
  st.workers[worker].load += batch.tokens;
  bump(st.metrics->deferred, deferred.size());
  bump(st.metrics->batches);
  bump(st.metrics->batched_queries, batch.entries.size());
  st.metrics->batch_size.observe(double(batch.entries.size()));

  auto batch_id = st.next_batch++;
  auto pass = batch.pass;
  auto handle = batch.handle;
  batch.started = now(self);
  st.workers[worker].batches.push_back(batch_id);
  st.metrics->worker(worker).in_flight.store(st.workers[worker].batches.size(),
                                             std::memory_order_relaxed);
  st.running.emplace(batch_id, std::move(batch));
  watch_passes(self);
  self->request(handle, caf::infinite, run_atom::value, std::move(pass), st.options.rows)
    .then([=](computed_pass& result) { on_pass_done(self, batch_id, handle, result); },
          [=](const caf::error& e) {
            // A Canopy error is the backend's: the pass failed. Anything else comes
            // from below (the worker or its connection is gone): the worker is lost
            // and its passes go to the others.
            if (code_of(e) != errc::none)
              fail_batch(self, batch_id, e);
            else
              lose_worker(self, worker, handle, caf::to_string(e));
            maybe_flush(self);
          });
  return deferred;
}

/// The worker whose running pass computes tokens of `tokens` (it will hold their KV),
/// if any. A pass that came back counts until its results are stored: the prepare this
/// routing follows may have reached the cache before them.
std::optional<cache::worker_id> running_computation(const batcher_state& st,
                                                    const cache::token_seq& tokens) {
  for (const auto& [id, batch] : st.running) {
    for (std::size_t i = 0; i < batch.item_owner.size(); ++i) {
      const auto& item = st.entries.at(batch.item_owner[i]).q.tokens;
      if (common_prefix(tokens, item) > batch.item_start[i])
        return batch.worker;
    }
  }
  return std::nullopt;
}

void dispatch(batcher_pointer self, std::vector<entry_id> ids, const prepared_batch& prepared) {
  auto& st = self->state;
  // Answer what became answerable, and drop entries nobody waits for any more.
  std::vector<entry_id> todo;
  std::vector<const prepared_entry*> todo_prepared;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto& p = prepared.entries[i];
    auto& entry = st.entries.at(ids[i]);
    if (p.hit.row) {
      bump(st.metrics->cache_hits);
      finish(self, ids[i], p.hit);
    } else if (entry.waiters.empty()) {
      finish(self, ids[i], make_error(errc::cancelled, "cancelled"));
    } else {
      todo.push_back(ids[i]);
      todo_prepared.push_back(&p);
    }
  }
  // Note [routing] in batch_planner.hpp: each entry to the worker holding its KV.
  std::vector<routing_entry> routing;
  for (std::size_t i = 0; i < todo.size(); ++i) {
    const auto& tokens = st.entries.at(todo[i]).q.tokens;
    routing.push_back({&tokens, todo_prepared[i]->kv, running_computation(st, tokens)});
  }
  const auto routes =
    route_entries(routing, {st.workers.ready(), st.workers.active(), st.workers.loads()});
  std::map<cache::worker_id, std::pair<std::vector<entry_id>, std::vector<const prepared_entry*>>>
    batches;
  std::vector<entry_id> later; // back to the head of the queue, in arrival order
  auto wait_for = [&](cache::worker_id w, entry_id id, std::uint64_t tokens) {
    st.waiting[w].push_back({id, tokens});
    st.workers[w].load += tokens;
    ++st.waiting_count;
  };
  for (std::size_t i = 0; i < todo.size(); ++i) {
    const auto& route = routes[i];
    if (route.waits) {
      if (route.worker) {
        const auto& prefix = routing[i].kv;
        const auto cached = *route.worker < prefix.size() ? prefix[*route.worker].length : 0u;
        wait_for(*route.worker, todo[i], routing[i].tokens->size() - cached);
      } else {
        later.push_back(todo[i]);
      }
      continue;
    }
    auto& batch = batches[*route.worker];
    if (batch.first.size() >= st.options.batch_size) {
      later.push_back(todo[i]);
      continue;
    }
    batch.first.push_back(todo[i]);
    batch.second.push_back(todo_prepared[i]);
  }
  // Entries deferred by a batch's planner share tokens its pass computes: they wait for
  // that worker, which will hold their KV.
  for (const auto& [worker, batch] : batches)
    for (auto id : start_batch(self, worker, batch.first, batch.second))
      wait_for(worker, id, 1); // its tokens past the shared prefix: at least one
  std::sort(later.begin(), later.end()); // entry ids grow with arrival
  requeue_front(self, later);
}

/// Flushes a batch if one is due (see maybe_flush).
void flush_if_due(batcher_pointer self) {
  auto& st = self->state;
  if (st.preparing || st.pending.empty())
    return;
  if (!st.workers.any_alive()) {
    fail_pending(self, make_error(errc::no_workers,
                                  (st.workers.size() == 0 ? "no worker has joined the engine"
                                                          : "every worker was lost") +
                                    st.metrics->remote_nodes_summary()));
    return;
  }
  // Note [idle flush]: queries sent together (the particles of an SMC step) reach us
  // one message after another. Flushing for an idle worker at the first would send it
  // alone and the rest a pass later; a message to ourselves queues behind those
  // already in the mailbox, so the idle flush waits for it.
  bool ready = st.pending.size() >= st.options.batch_size || window_end(st) <= now(self) ||
               (st.options.flush_when_idle && st.burst_enqueued);
  if (!ready && st.options.flush_when_idle && !st.workers.ready().empty()) {
    if (!st.idle_check_queued) {
      st.idle_check_queued = true;
      self->send(self, idle_atom::value);
    }
    return; // the idle check flushes, or arms the timer if the worker is busy by then
  }
  if (!ready || st.workers.ready().empty()) {
    arm_timer(self);
    return;
  }
  std::vector<entry_id> ids;
  prepare_request request;
  // A batch for each worker that can take one: entries are routed after the prepare.
  const auto room = st.options.batch_size * st.workers.ready().size();
  while (!st.pending.empty() && ids.size() < room) {
    auto id = st.pending.front();
    st.pending.pop_front();
    if (drop_if_abandoned(self, id))
      continue;
    const auto& entry = st.entries.at(id);
    ids.push_back(id);
    request.leaves.push_back(entry.leaf);
    request.require_kv.push_back(entry.q.require_kv);
  }
  arm_timer(self); // for the new first waiting query
  if (ids.empty())
    return;
  st.preparing = true;
  self->request(st.cache, caf::infinite, prepare_atom::value, std::move(request))
    .then(
      [=](const prepared_batch& prepared) {
        self->state.preparing = false;
        dispatch(self, ids, prepared);
        maybe_flush(self);
      },
      [=](const caf::error& e) {
        self->state.preparing = false;
        for (auto id : ids)
          finish(self, id, e);
        maybe_flush(self);
      });
}

/// Gives the locks collected by unlock_later back to the cache, as one message.
void send_unlocks(batcher_pointer self) {
  auto& st = self->state;
  if (!st.unlocks.empty())
    self->send(st.cache, release_atom::value, std::exchange(st.unlocks, {}));
}

} // namespace

// Every handler ends here after changing entries or the queue, so this is where the
// queue-depth gauge is refreshed and the locks of entries that left go back to the
// cache. Note [lock overlap]: that message follows any prepare sent just before, so
// prefixes that the leaving entries share with the next batch stay locked in
// between, and neither the unlocks nor the next batch's locks climb them.
void maybe_flush(batcher_pointer self) {
  flush_if_due(self);
  auto& st = self->state;
  st.metrics->queue_depth.store(st.pending.size() + st.waiting_count, std::memory_order_relaxed);
  send_unlocks(self);
}

void requeue_front(batcher_pointer self, const std::vector<entry_id>& ids) {
  auto& st = self->state;
  for (auto it = ids.rbegin(); it != ids.rend(); ++it)
    st.pending.push_front(*it);
}

void wake_waiting(batcher_pointer self, cache::worker_id w) {
  auto& st = self->state;
  auto it = st.waiting.find(w);
  if (it == st.waiting.end())
    return;
  std::vector<entry_id> ids;
  auto& slot = st.workers[w];
  for (const auto& e : it->second) {
    ids.push_back(e.id);
    slot.load -= std::min(slot.load, e.tokens);
  }
  st.waiting.erase(it);
  st.waiting_count -= ids.size();
  std::sort(ids.begin(), ids.end());
  requeue_front(self, ids);
}

void fail_pending(batcher_pointer self, const caf::error& error) {
  auto& st = self->state;
  while (!st.waiting.empty())
    wake_waiting(self, st.waiting.begin()->first);
  while (!st.pending.empty()) {
    auto id = st.pending.front();
    st.pending.pop_front();
    finish(self, id, error);
  }
}

namespace {

void enqueue(batcher_pointer self, query& q, waiter w, cache::node_id leaf) {
  auto& st = self->state;
  auto t = now(self);
  std::optional<clock_point> deadline;
  if (q.timeout.count() > 0)
    deadline = t + q.timeout;
  const token_view key(q.tokens);
  if (st.options.merge_duplicates) {
    auto it = st.by_key.find(key);
    if (it != st.by_key.end()) {
      auto& entry = st.entries.at(it->second);
      bump(st.metrics->merged_duplicates);
      if (entry.waiters.empty())
        entry.deadline = deadline;
      else if (entry.deadline)
        entry.deadline = deadline ? std::max(*entry.deadline, *deadline) : deadline;
      entry.waiters.push_back(std::move(w));
      unlock_later(st, leaf); // the entry holds a lock on the same node already
      send_unlocks(self);
      return;
    }
  }
  auto id = st.next_entry++;
  batch_entry entry{std::move(q), {std::move(w)}, t, deadline, leaf, key.hash};
  auto& stored = st.entries.emplace(id, std::move(entry)).first->second;
  if (st.options.merge_duplicates)
    // Entries never move their nodes, so the view stays valid.
    st.by_key.emplace(token_view(stored.q.tokens, stored.key_hash), id);
  st.pending.push_back(id);
  maybe_flush(self);
}

/// Removes the waiters (sink, tickets[i]) from the entries of sequences[i]. An entry
/// left without waiters stays where it is and is dropped when its turn comes
/// (drop_if_abandoned, or dispatch for one being prepared); one already computing
/// finishes, and its rows are cached.
void withdraw(batcher_pointer self, const answer_sink& sink,
              const std::vector<std::uint64_t>& tickets,
              const std::vector<cache::token_seq>& sequences) {
  auto& st = self->state;
  auto remove_from = [&](batch_entry& entry, std::uint64_t ticket) {
    auto& ws = entry.waiters;
    ws.erase(std::remove_if(ws.begin(), ws.end(),
                            [&](const waiter& w) { return w.ticket == ticket && w.sink == sink; }),
             ws.end());
  };
  for (std::size_t i = 0; i < tickets.size() && i < sequences.size(); ++i) {
    if (st.options.merge_duplicates) {
      auto it = st.by_key.find(token_view(sequences[i]));
      if (it != st.by_key.end())
        remove_from(st.entries.at(it->second), tickets[i]);
      continue;
    }
    // Without merging there is no index by sequence; cancellations are rare.
    for (auto& [id, entry] : st.entries)
      if (entry.q.tokens == sequences[i])
        remove_from(entry, tickets[i]);
  }
}

void cancel_all(batcher_pointer self) {
  auto& st = self->state;
  auto cancelled = make_error(errc::cancelled, "reset_async_queries() cancelled the query");
  fail_pending(self, cancelled);
  // Entries being prepared or computed keep going (their rows get cached); only
  // their waiters are answered now.
  for (auto& [id, entry] : st.entries) {
    for (const auto& w : entry.waiters)
      self->send(w.sink, answer_atom::value, w.ticket, cancelled);
    entry.waiters.clear();
  }
  maybe_flush(self);
}

} // namespace

} // namespace batcher_detail

using namespace batcher_detail;

batcher_actor::behavior_type batcher(batcher_pointer self, batcher_options options,
                                     cache_actor cache, std::shared_ptr<engine_metrics> metrics) {
  auto& st = self->state;
  st.workers = worker_pool(options.served, options.passes_in_flight);
  st.options = std::move(options);
  st.cache = std::move(cache);
  st.metrics = std::move(metrics);
  self->set_down_handler(
    [=](caf::down_msg& msg) { on_worker_down(self, msg.source, msg.reason); });
  self->set_exit_handler([=](caf::exit_msg& msg) {
    auto& st = self->state;
    auto stopping = make_error(errc::shutting_down, "the engine stopped");
    for (auto& [id, entry] : st.entries)
      for (const auto& w : entry.waiters)
        self->send(w.sink, answer_atom::value, w.ticket, stopping);
    st.entries.clear();
    for (auto& [id, job] : st.uncached)
      self->send(job.sink, answer_atom::value, job.ticket, stopping);
    st.uncached.clear();
    self->quit(msg.reason);
  });
  return {
    [=](enqueue_atom, query& q, std::uint64_t ticket, const answer_sink& sink,
        cache::node_id leaf) { enqueue(self, q, waiter{sink, ticket}, leaf); },
    [=](flush_atom) {
      self->state.flush_timer.fired(now(self));
      maybe_flush(self);
    },
    [=](idle_atom) {
      auto& st = self->state;
      st.idle_check_queued = false;
      st.burst_enqueued = true;
      maybe_flush(self);
      st.burst_enqueued = false;
    },
    [=](timeout_atom) { on_pass_watch(self); },
    [=](cancel_atom) {
      cancel_all(self);
      return true;
    },
    [=](cancel_atom, const answer_sink& sink, const std::vector<std::uint64_t>& tickets,
        const std::vector<cache::token_seq>& sequences) {
      withdraw(self, sink, tickets, sequences);
    },
    [=](join_atom, worker_actor& handle, worker_description& description) {
      return join(self, std::move(handle), std::move(description));
    },
    [=](drain_atom, cache::worker_id w) { drain(self, w); },
    [=](uncached_atom, cache::token_seq& tokens, std::uint64_t ticket, answer_sink& sink) {
      run_uncached(self, std::move(tokens), ticket, std::move(sink));
    },
  };
}

} // namespace canopy::actors
