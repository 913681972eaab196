#pragma once
// A GoogleTest fixture running CAF's deterministic test scheduler: nothing happens
// until the test calls sched.run(), and timers fire only when the test advances the
// clock. Canopy's message types are registered.
// Thread contract: everything runs on the test thread.

#include <canopy/messages/registration.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include <gtest/gtest.h>

#include <optional>

namespace canopy::testing {

struct deterministic_system : ::testing::Test {
  static caf::actor_system_config& prepare(caf::actor_system_config& config) {
    config.set("scheduler.policy", caf::atom("testing"));
    messages::add_message_types(config);
    return config;
  }
  caf::actor_system_config config;
  caf::actor_system sys{prepare(config)};
  caf::scheduler::test_coordinator& sched =
      dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());

  // A test system whose actors never ran hangs in its destructor: drain it.
  ~deterministic_system() override { sched.run(); }

  /// Sends a request from a new actor and runs everything; the reply or the error
  /// (request_timeout when nothing answered).
  template <class T, class Dest, class... Ts>
  caf::expected<T> request_and_run(const Dest& dest, Ts... xs) {
    std::optional<caf::expected<T>> out;
    sys.spawn([&, dest](caf::event_based_actor* self) {
      self->request(dest, caf::infinite, xs...)
          .then([&](T& x) { out = std::move(x); },
                [&](caf::error& e) { out = std::move(e); });
    });
    sched.run();
    if (!out)
      return caf::make_error(caf::sec::request_timeout);
    return std::move(*out);
  }
};

} // namespace canopy::testing
