#include <canopy/actors/batcher_actor.hpp>

#include "batcher_internals.hpp"

#include <canopy/messages/errors.hpp>

#include <algorithm>
#include <optional>
#include <utility>

namespace canopy::actors {

using namespace messages;

namespace batcher_detail {

namespace {

/// Gives a lookup's lock on `leaf` back to the cache (with the others of this message).
void unlock_later(batcher_state& st, cache::node_id leaf) {
  if (leaf != cache::root_node)
    st.unlocks.push_back(leaf);
}

} // namespace

std::vector<waiter> take_waiters(batcher_pointer self, entry_id id) {
  auto& st = self->state;
  auto it = st.entries.find(id);
  if (it == st.entries.end())
    return {};
  auto waiters = std::move(it->second.waiters);
  if (st.options.merge_duplicates)
    st.by_key.erase(query_key(it->second.q, it->second.key_hash));
  unlock_later(st, it->second.leaf);
  for (auto pin : it->second.pins)
    unlock_later(st, pin);
  st.entries.erase(it);
  return waiters;
}

namespace {

/// When the batch window of the first waiting query closes.
clock_point window_end(const batcher_state& st) {
  return st.entries.at(st.pending.front()).arrival + st.options.batch_timeout;
}

// Note [idle gather]
// How long an idle worker's batch waits for queries still arriving: a 64th of the
// recent passes' round trip (at most 1.6% more latency for a lone query), or nothing
// when that is under 100 us, where timers are too coarse to wait with and passes are
// too cheap for a split batch to matter. Measured on the 110M Llama, SMC 64 x 64, one
// compute thread (`scripts/peers/bench_llama_cpp.py --models llama110m --workloads
// smc`, median of 3): 252 queries/s without it, 300 with `--settings
// "--flush_when_idle false"` (which waits the whole 2 ms window), 304 with it.
constexpr auto min_idle_gather = std::chrono::microseconds(100);

clock_point::duration idle_gather(const batcher_state& st) {
  const auto gather = st.recent_pass / 64;
  if (gather < min_idle_gather)
    return clock_point::duration::zero();
  return std::min<clock_point::duration>(gather, st.options.batch_timeout);
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
    finish(self, id,
           make_error(errc::deadline_exceeded, "the query's deadline passed "
                                               "before it reached a worker"));
    return true;
  }
  return false;
}

/// Flushes a batch if one is due (see maybe_flush).
void flush_if_due(batcher_pointer self) {
  auto& st = self->state;
  if (st.preparing || st.pending.empty())
    return;
  if (!st.workers.any_alive()) {
    // Note [rejoin patience]: a front whose nodes are all lost (or not joined yet) keeps
    // its queries for rejoin_patience; a node back within it (restarted, reconnected)
    // takes them. Past it, or with no remote nodes, they fail.
    const auto patience = st.options.rejoin_patience;
    if (!st.workerless_since)
      st.workerless_since = now(self);
    if (now(self) < *st.workerless_since + patience) {
      st.flush_timer.arm(self, *st.workerless_since + patience, flush_atom::value);
      return;
    }
    fail_pending(
        self,
        make_error(
            errc::no_workers,
            (st.workers.size() == 0 ? "no worker has joined the engine"
                                    : "every worker was lost") +
                (patience.count() > 0
                     ? " and none came back within " +
                           std::to_string(
                               std::chrono::duration_cast<std::chrono::milliseconds>(
                                   patience)
                                   .count()) +
                           " ms"
                     : std::string{}) +
                st.metrics->remote_nodes_summary()));
    st.workerless_since.reset();
    return;
  }
  st.workerless_since.reset();
  // Note [idle flush]: queries sent together (the particles of an SMC step) reach us
  // one message after another. Flushing for an idle worker at the first would send it
  // alone and the rest a pass later; a message to ourselves queues behind those
  // already in the mailbox, so the idle flush waits for it.
  // That catches what is in the mailbox, not what the caller is still sending: a host
  // thread asking 64 queries takes a few hundred microseconds, and the first few left
  // alone. Where passes are slow, that lone pass costs nearly a full one (a 110M model
  // reads all its weights either way). So when recent passes took long, the idle flush
  // waits a 64th of a pass for the rest (Note [idle gather]).
  const auto gather = idle_gather(st);
  const auto gathered = st.entries.at(st.pending.front()).arrival + gather;
  bool ready = st.pending.size() >= st.options.batch_size ||
               window_end(st) <= now(self) ||
               (st.options.flush_when_idle &&
                (st.burst_enqueued || (gather.count() > 0 && gathered <= now(self))));
  if (!ready && st.options.flush_when_idle && !st.workers.ready().empty()) {
    if (gather.count() > 0) {
      st.flush_timer.arm(self, gathered, flush_atom::value);
      return;
    }
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
  st.metrics->queue_depth.store(st.pending.size() + st.waiting_count,
                                std::memory_order_relaxed);
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
  const query_key key(q);
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
  batch_entry entry{std::move(q), {std::move(w)}, t, deadline, leaf, {}, key.hash};
  auto& stored = st.entries.emplace(id, std::move(entry)).first->second;
  if (st.options.merge_duplicates)
    // Entries never move their nodes, so the view stays valid.
    st.by_key.emplace(query_key(stored.q, stored.key_hash), id);
  st.pending.push_back(id);
  maybe_flush(self);
}

/// Removes the waiters (sink, tickets[i]) from the entries of keys[i]. An entry
/// left without waiters stays where it is and is dropped when its turn comes
/// (drop_if_abandoned, or dispatch for one being prepared); one already computing
/// finishes, and its rows are cached.
void withdraw(batcher_pointer self, const answer_sink& sink,
              const std::vector<std::uint64_t>& tickets, const std::vector<query>& keys) {
  auto& st = self->state;
  auto remove_from = [&](batch_entry& entry, std::uint64_t ticket) {
    auto& ws = entry.waiters;
    ws.erase(std::remove_if(
                 ws.begin(), ws.end(),
                 [&](const waiter& w) { return w.ticket == ticket && w.sink == sink; }),
             ws.end());
  };
  for (std::size_t i = 0; i < tickets.size() && i < keys.size(); ++i) {
    if (st.options.merge_duplicates) {
      auto it = st.by_key.find(query_key(keys[i]));
      if (it != st.by_key.end())
        remove_from(st.entries.at(it->second), tickets[i]);
      continue;
    }
    // Without merging there is no index by key; cancellations are rare.
    for (auto& [id, entry] : st.entries)
      if (query_key(entry.q) == query_key(keys[i]))
        remove_from(entry, tickets[i]);
  }
}

void cancel_all(batcher_pointer self) {
  auto& st = self->state;
  auto cancelled =
      make_error(errc::cancelled, "reset_async_queries() cancelled the query");
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
                                     cache_actor cache,
                                     std::shared_ptr<engine_metrics> metrics) {
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
          cache::node_id leaf) {
        enqueue(self, q, waiter{sink, ticket}, leaf);
      },
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
          const std::vector<query>& keys) { withdraw(self, sink, tickets, keys); },
      [=](join_atom, worker_actor& handle, worker_description& description) {
        return join(self, std::move(handle), std::move(description));
      },
      [=](drain_atom, cache::worker_id w) { drain(self, w); },
      [=](ping_atom) { return true; },
      [=](uncached_atom, cache::token_seq& tokens, std::uint64_t ticket,
          answer_sink& sink) {
        run_uncached(self, std::move(tokens), ticket, std::move(sink));
      },
      [=](adapter_atom, const std::string& key, backends::lora_adapter_files& files) {
        return add_adapter(self, key, files);
      },
      [=](adapter_atom, const std::string& key) {
        const bool removed = remove_adapter(self, key);
        maybe_flush(self);
        return removed;
      },
  };
}

} // namespace canopy::actors
