#pragma once
// The production actor wiring (spawn_engine_actors) on the deterministic scheduler,
// with probe backends, and client actors whose replies the test reads.
// Thread contract: everything runs on the test thread.

#include "deterministic_system.hpp"
#include "probe_backend.hpp"

#include <canopy/actors/engine_actors.hpp>
#include <canopy/backends/mock_backend.hpp>
#include <canopy/messages/errors.hpp>

#include <caf/event_based_actor.hpp>
#include <caf/scheduled_actor.hpp>

#include <algorithm>
#include <iterator>
#include <optional>
#include <vector>

namespace canopy::testing {

struct pipeline_fixture : deterministic_system {
  using reply = std::optional<caf::expected<messages::shared_logprobs>>;

  std::shared_ptr<probe> probes = std::make_shared<probe>();
  backends::mock_options mock;
  engine_config config;
  actors::engine_actors actors;
  std::vector<reply> replies;

  pipeline_fixture() {
    mock.vocab_size = 64;
    mock.context_length = 32;
    mock.kv_bytes_per_token = 100;
  }

  // Every actor must end before the system can: stopping the fronts first answers
  // the clients still waiting.
  ~pipeline_fixture() override {
    if (actors.batcher)
      actors.stop();
    sched.run();
  }

  void start(std::uint32_t workers = 1) {
    config.workers = workers;
    config.backend_factory = [this](std::uint32_t, const std::string&) {
      return std::make_unique<probe_backend>(mock, probes);
    };
    auto backends = actors::make_backends(config);
    auto model = actors::served_model(config, backends);
    auto local = actors::spawn_local_workers(sys, config, std::move(backends),
                                             actors::worker_threads::scheduled);
    actors = actors::spawn_engine_actors(sys, config, std::move(model), std::move(local));
    sched.run();
  }

  /// Sends a query from a new client actor; returns the index of its reply.
  template <class Query> std::size_t ask(Query q) {
    return ask_with(messages::logprobs_atom::value, std::move(q));
  }

  /// The same on the reference path (no cache, no batching, no KV kept).
  std::size_t ask_uncached(cache::token_seq tokens) {
    return ask_with(messages::uncached_atom::value, std::move(tokens));
  }

  template <class Atom, class Query> std::size_t ask_with(Atom atom, Query q) {
    auto index = replies.size();
    replies.emplace_back();
    auto front = actors.fronts.front();
    sys.spawn([this, index, front, atom, q](caf::event_based_actor* self) {
      self->request(front, caf::infinite, atom, q)
          .then([this,
                 index](const messages::shared_logprobs& row) { replies[index] = row; },
                [this, index](const caf::error& e) { replies[index] = e; });
    });
    return index;
  }

  bool answered(std::size_t index) const { return replies[index].has_value(); }

  messages::errc error_of(std::size_t index) const {
    const auto& r = replies.at(index);
    if (!r || *r)
      return messages::errc::none;
    return messages::code_of(r->error());
  }

  /// True when the reply is exactly the mock's row for `tokens`.
  bool matches_reference(std::size_t index, const cache::token_seq& tokens) const {
    const auto& r = replies.at(index);
    if (!r || !*r)
      return false;
    auto expected = backends::mock_logprobs(mock, tokens.data(), tokens.size());
    std::vector<float> got(expected.size());
    if ((*r)->row->vocab() != expected.size())
      return false;
    (*r)->row->decode(got.data());
    return got == expected;
  }

  /// Trie nodes the cache holds locked for queries in the batcher.
  std::uint64_t locked_nodes() const {
    return actors.metrics->cache_count<&canopy::engine_stats::locked_nodes>().load();
  }

  // Every test ends with its queries answered, so whatever path they took (merged,
  // cancelled, failed, timed out, deferred, evicted around), each lock a lookup took
  // for them must be back.
  void TearDown() override {
    sched.run();
    EXPECT_EQ(locked_nodes(), 0u) << "a query's lock on its trie node was never released";
  }

  /// Runs every actor but the worker until only the worker has work: its pass stays
  /// in flight while the rest of the pipeline moves on.
  void run_all_but_worker(std::size_t worker = 0) {
    run_all_but(caf::actor_cast<caf::abstract_actor*>(actors.workers.at(worker)));
  }

  /// Runs every actor but `actor` until only it has work (its mailbox fills).
  void run_all_but(caf::abstract_actor* actor) {
    auto* held = dynamic_cast<caf::resumable*>(actor);
    for (;;) {
      auto it = std::find_if(sched.jobs.begin(), sched.jobs.end(),
                             [&](caf::resumable* job) { return job != held; });
      if (it == sched.jobs.end())
        return;
      std::rotate(sched.jobs.begin(), it, std::next(it));
      sched.run_once();
    }
  }

  /// Runs single steps until a worker has a pass waiting in its mailbox.
  bool run_until_pass_queued(std::size_t worker = 0) {
    auto* w = dynamic_cast<caf::scheduled_actor*>(
        caf::actor_cast<caf::abstract_actor*>(actors.workers.at(worker)));
    for (int i = 0; i < 1000; ++i) {
      // An idle actor's inbox is "blocked" (waiting), which empty() does not count
      // as empty.
      if (!w->mailbox().empty() && !w->mailbox().blocked())
        return true;
      if (!sched.try_run_once())
        return false;
    }
    return false;
  }
};

} // namespace canopy::testing
