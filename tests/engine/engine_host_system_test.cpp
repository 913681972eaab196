// The host-system form: the engine's actors live in a host's actor system, and a host
// actor queries them through the typed handle.

#include "reference.hpp"

#include <canopy/engine.hpp>
#include <canopy/messages/registration.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>

#include <gtest/gtest.h>

#include <future>

using canopy::engine_config;
using canopy::token_seq;
using namespace canopy::messages;

namespace {

TEST(engine_host_system, a_host_actor_queries_the_engine_through_its_handle) {
  caf::actor_system_config host_config;
  host_config.set("scheduler.max-threads", std::size_t{2});
  add_message_types(host_config);
  caf::actor_system host{host_config};
  engine_config config;
  config.backend = "mock";
  config.vocab_size = 50;
  canopy::engine lm{host, config};
  token_seq s{4, 2, 4};

  std::promise<caf::expected<shared_logprobs>> answer;
  auto handle = lm.handle();
  host.spawn([&answer, handle, s](caf::event_based_actor* self) {
    self->request(handle, caf::infinite, logprobs_atom::value, s)
        .then([&answer](const shared_logprobs& row) { answer.set_value(row); },
              [&answer](const caf::error& e) { answer.set_value(e); });
  });
  auto got = answer.get_future().get();
  ASSERT_TRUE(got) << host.render(got.error());
  EXPECT_TRUE(canopy::testing::equals_reference(canopy::to_tensor(*got), config, s));

  // Errors reach host actors as Canopy errors too.
  caf::scoped_actor self{host};
  self->request(handle, caf::infinite, logprobs_atom::value, token_seq{})
      .receive(
          [](const shared_logprobs&) { ADD_FAILURE() << "an empty query was answered"; },
          [](const caf::error& e) { EXPECT_EQ(code_of(e), errc::empty_sequence); });
  // The C++ API works on the same engine.
  EXPECT_TRUE(
      canopy::testing::equals_reference(lm.next_token_logprobs_sync(s), config, s));
}

} // namespace
