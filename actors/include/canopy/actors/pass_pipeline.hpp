#pragma once
// The passes a worker actor has started on its backend (backend_i::start) and not yet
// answered. A pass the device computes on its own (CUDA) is answered later, when its
// rows are on the host: meanwhile the actor takes its next messages, so that a pass
// already waiting in its mailbox starts, its launch overlapping this one's compute, and
// this one's rows come to the host while the next computes (worker_passes_in_flight 2
// or more keeps one waiting). A pass computed before start returned (the CPU) is
// answered at once when none waits before it.
// Every pass is answered exactly once: with its rows (tagged with the dtype it asked
// for), in the order the passes started, or with errc::backend_failure and the
// backend's message, at once for a pass it refused and in order for one it failed to
// finish. Passes still started when the pipeline is destroyed are not answered: their
// actor is gone, which its callers see (the batcher requeues a lost worker's passes).
// Thread contract: the owning actor's thread, which is the backend's.

#include <canopy/backends/backend.hpp>
#include <canopy/cache/logprob_row.hpp>
#include <canopy/messages/computed_pass.hpp>

#include <caf/typed_response_promise.hpp>

#include <deque>
#include <functional>
#include <memory>

namespace canopy::actors {

class pass_pipeline {
public:
  using promise = caf::typed_response_promise<messages::computed_pass>;
  /// Runs on a computed pass before it is answered; an error it returns is the answer
  /// instead.
  using on_computed = std::function<caf::error(const messages::computed_pass&)>;

  /// Starts `request` on `backend`, answered through `answer`. True when the actor must
  /// send itself a poll (a pass waits for the device and no poll is on its way); then
  /// answer_ready() on that poll.
  bool start(backends::backend_i& backend, const backends::pass_request& request,
             cache::row_dtype rows, promise answer, on_computed computed = {});

  /// On the actor's poll: answers the passes whose rows are on the host, in the order
  /// they started. True when some still wait: the actor polls again, after the messages
  /// that came meanwhile (this yields the thread first, as a wait for the device would).
  bool answer_ready();

  /// Waits for every started pass and answers it (before the actor stops).
  void answer_all();

private:
  struct started {
    std::unique_ptr<backends::started_pass> pass;
    promise answer;
    cache::row_dtype rows;
    std::int64_t vocab;
    on_computed computed;
  };
  /// Answers the started passes whose rows are on the host, in order.
  void answer_arrived();
  /// True when a pass waits and no poll is on its way; then one is.
  bool poll_needed();
  /// Finishes `s` and answers it.
  void deliver(started& s);

  std::deque<started> started_;
  bool polling_ = false; // a poll is on its way to the actor
};

} // namespace canopy::actors
