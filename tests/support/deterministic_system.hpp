#pragma once
// A GoogleTest fixture running CAF's deterministic test scheduler: nothing happens
// until the test calls sched.run(), and timers fire only when the test advances the
// clock. Canopy's message types are registered.
// Thread contract: everything runs on the test thread.

#include <canopy/messages/registration.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include <gtest/gtest.h>

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
};

} // namespace canopy::testing
