// The batcher's passes: routing a prepared batch's entries to workers (Note [routing]),
// planning and sending each worker's pass, and what comes back: stored and answered,
// failed, or timed out by the watchdog.

#include "batcher_internals.hpp"

#include <canopy/actors/pass_check.hpp>
#include <canopy/messages/adapter_key.hpp>
#include <canopy/messages/errors.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

namespace canopy::actors::batcher_detail {

using namespace messages;

namespace {

/// The worker is free of this batch: it may take another.
void release_worker(batcher_pointer self, const running_batch& batch,
                    std::uint64_t batch_id) {
  auto& slot = self->state.workers[batch.worker];
  auto& batches = slot.batches;
  batches.erase(std::remove(batches.begin(), batches.end(), batch_id), batches.end());
  slot.load -= std::min(slot.load, batch.tokens);
  self->state.metrics->worker(batch.worker)
      .in_flight.store(batches.size(), std::memory_order_relaxed);
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

void on_pass_done(batcher_pointer self, std::uint64_t batch_id,
                  const worker_actor& worker, computed_pass& result) {
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
  if (auto problem =
          computed_pass_problem(batch.pass, result, st.options.served.vocab_size);
      !problem.empty()) {
    fail_batch(self, batch_id,
               make_error(errc::backend_failure,
                          "worker " + std::to_string(batch.worker) +
                              " answered a pass that does not fit: " + problem));
    return;
  }
  st.metrics->count_pass(batch.worker, result.tokens_computed, result.matmul_flops,
                         result.compute_ns);
  const auto round_trip = now(self) - batch.started;
  st.metrics->pass_round_trip.record(round_trip);
  st.recent_pass = (3 * st.recent_pass + round_trip) / 4;
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

} // namespace

void on_pass_watch(batcher_pointer self) {
  auto& st = self->state;
  st.pass_watch.fired(now(self));
  std::vector<std::uint64_t> overdue;
  for (const auto& [id, batch] : st.running)
    if (!batch.returned && batch.started + st.options.pass_timeout <= now(self))
      overdue.push_back(id);
  for (auto id : overdue)
    fail_batch(self, id,
               make_error(errc::backend_failure, "the pass exceeded pass_timeout_ms"));
  watch_passes(self);
  maybe_flush(self);
}

namespace {

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
    const auto& q = st.entries.at(ids[i]).q;
    plan_entries.push_back(
        {&q.tokens, worker < prefixes.size() ? prefixes[worker] : cache::kv_prefix{},
         q.partition, q.adapter});
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

/// The worker whose running pass computes tokens of `q` (it will hold their KV), if
/// any. A pass that came back counts until its results are stored: the prepare this
/// routing follows may have reached the cache before them.
std::optional<cache::worker_id> running_computation(const batcher_state& st,
                                                    const query& q) {
  for (const auto& [id, batch] : st.running) {
    for (std::size_t i = 0; i < batch.item_owner.size(); ++i) {
      const auto& item = st.entries.at(batch.item_owner[i]).q;
      if (same_partition(q, item) &&
          common_prefix(q.tokens, item.tokens) > batch.item_start[i])
        return batch.worker;
    }
  }
  return std::nullopt;
}

} // namespace

void dispatch(batcher_pointer self, std::vector<entry_id> ids,
              const prepared_batch& prepared) {
  auto& st = self->state;
  // Answer what became answerable, and drop entries nobody waits for any more.
  std::vector<entry_id> todo;
  std::vector<const prepared_entry*> todo_prepared;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto& p = prepared.entries[i];
    auto& entry = st.entries.at(ids[i]);
    // This prepare's pins replace an earlier one's (it was locked again, so no KV the
    // next pass reads goes in between).
    st.unlocks.insert(st.unlocks.end(), entry.pins.begin(), entry.pins.end());
    entry.pins = p.pins;
    if (p.hit.row) {
      bump(st.metrics->cache_hits);
      finish(self, ids[i], p.hit);
    } else if (entry.waiters.empty()) {
      finish(self, ids[i], make_error(errc::cancelled, "cancelled"));
    } else if (!entry.q.adapter.empty() && st.adapters.count(entry.q.adapter) == 0) {
      finish(self, ids[i],
             make_error(errc::unknown_adapter,
                        "adapter '" + std::string(adapter_name_of(entry.q.adapter)) +
                            "' was removed while the query waited"));
    } else {
      todo.push_back(ids[i]);
      todo_prepared.push_back(&p);
    }
  }
  // Note [routing] in batch_planner.hpp: each entry to the worker holding its KV.
  std::vector<routing_entry> routing;
  for (std::size_t i = 0; i < todo.size(); ++i) {
    const auto& q = st.entries.at(todo[i]).q;
    routing.push_back(
        {&q.tokens, todo_prepared[i]->kv, running_computation(st, q), q.partition});
  }
  const auto routes = route_entries(
      routing, {st.workers.ready(), st.workers.active(), st.workers.loads()});
  std::map<cache::worker_id,
           std::pair<std::vector<entry_id>, std::vector<const prepared_entry*>>>
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
        const auto cached =
            *route.worker < prefix.size() ? prefix[*route.worker].length : 0u;
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

} // namespace canopy::actors::batcher_detail
