#pragma once
// What the batcher's parts share: the queue and its flushes (batcher_actor.cpp), the
// passes, routed, run and answered (batcher_passes.cpp), and its workers coming and
// going, with the reference path that runs on them (batcher_workers.cpp), and the LoRA
// adapters they load (batcher_adapters.cpp).
// Thread contract: called only from the batcher's handlers.

#include <canopy/actors/batcher_actor.hpp>

#include <caf/actor_clock.hpp>
#include <caf/error.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace canopy::actors::batcher_detail {

using clock_point = caf::actor_clock::time_point;

inline clock_point now(batcher_pointer self) {
  return self->clock().now();
}

/// Forgets an entry (its lock goes back with the next unlocks) and returns who waits.
std::vector<waiter> take_waiters(batcher_pointer self, entry_id id);

/// Answers every waiter of an entry and forgets it.
template <class Answer>
void finish(batcher_pointer self, entry_id id, const Answer& answer) {
  for (const auto& w : take_waiters(self, id))
    self->send(w.sink, messages::answer_atom::value, w.ticket, answer);
}

/// Routes the prepared entries `ids` to workers and sends each worker its pass;
/// entries that became answerable are answered, the others wait or go back to the
/// queue.
void dispatch(batcher_pointer self, std::vector<entry_id> ids,
              const messages::prepared_batch& prepared);
/// The pass watchdog's turn: fails every batch whose pass outlived pass_timeout.
void on_pass_watch(batcher_pointer self);

/// Puts entries back at the head of the queue, keeping their order.
void requeue_front(batcher_pointer self, const std::vector<entry_id>& ids);
/// The entries waiting for worker `w` go back to the head of the queue: it can take a
/// pass, or it will never (lost, draining).
void wake_waiting(batcher_pointer self, cache::worker_id w);
/// Answers every queued query with `error`.
void fail_pending(batcher_pointer self, const caf::error& error);
/// Flushes a batch if one is due, refreshes the queue gauge and gives back the locks of
/// entries that left. Every handler ends here after changing entries or the queue.
void maybe_flush(batcher_pointer self);

/// Admits a worker (see batcher_actor's join_atom).
caf::result<cache::worker_id> join(batcher_pointer self, messages::worker_actor handle,
                                   messages::worker_description description);
/// The worker in slot `w` takes no new pass.
void drain(batcher_pointer self, cache::worker_id w);
/// The worker in slot `w` is gone if `handle` is still its worker: its KV is
/// forgotten, the queries of its unreturned passes go back to the queue and its
/// reference-path queries to other workers; with no worker left, they fail.
void lose_worker(batcher_pointer self, cache::worker_id w,
                 const messages::worker_actor& handle, const std::string& why);
/// A worker's handle went down.
void on_worker_down(batcher_pointer self, const caf::actor_addr& source,
                    const caf::error& reason);

/// The reference path: runs the sequence alone on the least loaded active worker.
void run_uncached(batcher_pointer self, cache::token_seq tokens, std::uint64_t ticket,
                  messages::answer_sink sink);
/// Sends job `id` to an active worker, or answers it worker_lost when none is left.
void send_uncached(batcher_pointer self, std::uint64_t id);

/// Loads an adapter on every worker and keeps it for joiners (batcher_actor's
/// adapter_atom).
caf::result<bool> add_adapter(batcher_pointer self, const std::string& key,
                              backends::lora_adapter_files& files);
/// Unloads it everywhere; false when it was not loaded.
bool remove_adapter(batcher_pointer self, const std::string& key);
/// A joining worker loads every adapter, before any pass is sent to it.
void load_adapters(batcher_pointer self, const messages::worker_actor& handle);

} // namespace canopy::actors::batcher_detail
