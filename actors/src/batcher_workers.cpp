// The batcher's workers coming and going: joins, drains and losses, and the reference
// path, which runs on whichever worker is there.

#include "batcher_internals.hpp"

#include <canopy/actors/pass_check.hpp>

#include <canopy/messages/errors.hpp>

#include <caf/sec.hpp>

#include <algorithm>
#include <limits>
#include <string>

namespace canopy::actors::batcher_detail {

using namespace messages;

namespace {

/// The least loaded active worker, if any.
std::optional<cache::worker_id> least_loaded(const worker_pool& pool) {
  std::optional<cache::worker_id> best;
  for (auto w : pool.active())
    if (!best || pool[w].load < pool[*best].load)
      best = w;
  return best;
}

std::string label(const worker_pool& pool, cache::worker_id w) {
  const auto& d = pool[w].description;
  return "worker " + std::to_string(w) + " (" + d.node + ", " + d.device + ")";
}

} // namespace

caf::result<cache::worker_id> join(batcher_pointer self, worker_actor handle,
                                   worker_description description) {
  auto& st = self->state;
  // A worker coming back may be quicker than the news of its loss.
  const auto named = description.slot;
  if (named < st.workers.size() && st.workers[named].state != worker_status::lost &&
      st.workers[named].handle != handle)
    lose_worker(self, named, st.workers[named].handle, "replaced by a new connection");
  auto admitted = st.workers.admit(handle, description);
  if (auto* problem = std::get_if<std::string>(&admitted))
    return make_error(errc::invalid_request, *problem);
  const auto w = std::get<cache::worker_id>(admitted);
  const auto& slot = st.workers[w];
  self->monitor(slot.handle);
  st.metrics->worker_joined(w, slot.description.node, slot.description.device);
  // Before any prepare that could route to it, so the cache knows where its KV goes.
  self->send(st.cache, join_atom::value, w, slot.handle, slot.description);
  load_adapters(self, slot.handle); // before any pass: its mailbox keeps the order
  maybe_flush(self);
  return w;
}

void drain(batcher_pointer self, cache::worker_id w) {
  auto& st = self->state;
  if (w >= st.workers.size() || st.workers[w].state != worker_status::active)
    return;
  st.workers[w].state = worker_status::draining;
  st.metrics->worker(w).state.store(worker_status::draining, std::memory_order_relaxed);
  wake_waiting(self, w); // its KV is not used any more
  maybe_flush(self);
}

void lose_worker(batcher_pointer self, cache::worker_id w, const worker_actor& handle,
                 const std::string& why) {
  auto& st = self->state;
  if (w >= st.workers.size() || st.workers[w].state == worker_status::lost ||
      st.workers[w].handle != handle)
    return; // lost already, or the slot has a new worker
  auto& slot = st.workers[w];
  auto& m = st.metrics->worker(w);
  slot.state = worker_status::lost;
  m.state.store(worker_status::lost, std::memory_order_relaxed);
  bump(m.losses);
  self->send(st.cache, forget_atom::value, w);
  // Its passes that had not come back: their queries go to the head of the queue
  // (they keep their locks and waiters), to be prepared again for the others. A
  // pass that came back is being stored and answers as usual.
  std::vector<entry_id> again;
  for (auto it = st.running.begin(); it != st.running.end();) {
    if (it->second.worker == w && !it->second.returned) {
      again.insert(again.end(), it->second.entries.begin(), it->second.entries.end());
      it = st.running.erase(it);
    } else {
      ++it;
    }
  }
  slot.batches.clear();
  slot.load = 0;
  m.in_flight.store(0, std::memory_order_relaxed);
  bump(m.redispatched, again.size());
  requeue_front(self, again);
  wake_waiting(self, w);
  std::vector<std::uint64_t> jobs; // sending one again may answer and erase it
  for (const auto& [id, job] : st.uncached)
    if (job.worker == w)
      jobs.push_back(id);
  for (auto id : jobs)
    send_uncached(self, id);
  if (!st.workers.any_alive() && st.options.rejoin_patience.count() == 0)
    fail_pending(self,
                 make_error(errc::worker_lost, label(st.workers, w) + " was lost (" +
                                                   why + ") and no worker is left" +
                                                   st.metrics->remote_nodes_summary()));
  maybe_flush(self); // with rejoin patience, the queries wait (Note [rejoin patience])
}

void on_worker_down(batcher_pointer self, const caf::actor_addr& source,
                    const caf::error& reason) {
  auto& st = self->state;
  if (auto w = st.workers.find(source))
    lose_worker(self, *w, st.workers[*w].handle, caf::to_string(reason));
}

void run_uncached(batcher_pointer self, cache::token_seq tokens, std::uint64_t ticket,
                  answer_sink sink) {
  auto& st = self->state;
  const auto id = st.next_uncached++;
  st.uncached.emplace(id, uncached_job{std::move(tokens), ticket, std::move(sink), 0, 0});
  send_uncached(self, id);
}

void send_uncached(batcher_pointer self, std::uint64_t id) {
  auto& st = self->state;
  auto& job = st.uncached.at(id);
  auto answer = [self, id](auto&& result) {
    auto& jobs = self->state.uncached;
    auto it = jobs.find(id);
    self->send(it->second.sink, answer_atom::value, it->second.ticket,
               std::forward<decltype(result)>(result));
    jobs.erase(it);
  };
  const auto w = least_loaded(st.workers);
  if (!w) {
    answer(
        make_error(st.workers.any_alive() ? errc::no_workers : errc::worker_lost,
                   "no worker can run the query" + st.metrics->remote_nodes_summary()));
    return;
  }
  const auto attempt = ++job.attempt;
  job.worker = *w;
  const auto handle = st.workers[*w].handle;
  backends::pass_item item;
  item.tokens = job.tokens;
  item.rows = {static_cast<std::uint32_t>(job.tokens.size() - 1)};
  item.keep_kv = false;
  backends::pass_request pass{{std::move(item)}};
  self->request(handle, st.options.pass_timeout, run_atom::value, pass,
                cache::row_dtype::float32)
      .then(
          [=](computed_pass& result) {
            auto it = self->state.uncached.find(id);
            if (it == self->state.uncached.end() || it->second.attempt != attempt)
              return; // answered already, or sent again after its worker was lost
            const auto& st = self->state;
            if (auto problem =
                    computed_pass_problem(pass, result, st.options.served.vocab_size);
                !problem.empty()) {
              answer(make_error(errc::backend_failure,
                                "a worker answered a pass that does not "
                                "fit: " +
                                    problem));
              return;
            }
            st.metrics->count_pass(it->second.worker, result.tokens_computed,
                                   result.matmul_flops, result.compute_ns);
            answer(take_rows(result.items.at(0), result).at(0));
          },
          [=](const caf::error& e) {
            auto it = self->state.uncached.find(id);
            if (it == self->state.uncached.end() || it->second.attempt != attempt)
              return;
            if (e == caf::sec::request_timeout)
              answer(
                  make_error(errc::backend_failure, "the pass exceeded pass_timeout_ms"));
            else if (code_of(e) != errc::none)
              answer(e);
            else
              lose_worker(self, it->second.worker, handle, caf::to_string(e));
          });
}

} // namespace canopy::actors::batcher_detail
