// Note [answer bursts] in request_actor.hpp: answers that reach the request actor
// together are delivered together, newest first (a host waiting on futures in the
// order it asked then wakes once per burst), every one of them exactly once, and an
// engine that stops while it holds answers still delivers them.

#include "pipeline_fixture.hpp"

#include <canopy/actors/request_actor.hpp>

#include <caf/send.hpp>

#include <vector>

using canopy::cache::token_seq;
namespace msg = canopy::messages;

namespace {

struct answer_bursts_test : canopy::testing::pipeline_fixture {
  // Which query each delivery answered, in delivery order, and whether with a row.
  std::vector<std::pair<int, bool>> delivered;
  const std::vector<token_seq> sequences = {{1, 2, 3}, {4, 5}, {6}};

  void ask_with_callback(int index) {
    msg::reply_callback reply{[this, index](caf::expected<msg::shared_logprobs> result) {
      delivered.emplace_back(index, static_cast<bool>(result));
    }};
    caf::anon_send(actors.fronts.front(), msg::logprobs_atom::value,
                   msg::query{sequences[static_cast<std::size_t>(index)]},
                   std::move(reply));
  }

  /// Each sequence computed once, so that asking again hits the cache, whose answers
  /// reach the request actor together.
  void warm() {
    for (const auto& s : sequences)
      ask(s);
    sched.run();
    delivered.clear();
  }

  const canopy::actors::request_state& front_state() {
    auto* front = caf::actor_cast<caf::abstract_actor*>(actors.fronts.front());
    return static_cast<canopy::actors::request_pointer>(front)->state;
  }
};

TEST_F(answer_bursts_test,
       answers_arriving_together_are_delivered_together_newest_first) {
  start();
  warm();
  for (int i = 0; i < 3; ++i)
    ask_with_callback(i);
  sched.run();
  const std::vector<std::pair<int, bool>> newest_first = {
      {2, true}, {1, true}, {0, true}};
  EXPECT_EQ(delivered, newest_first);
}

TEST_F(answer_bursts_test, answers_held_when_the_engine_stops_are_still_delivered) {
  start();
  warm();
  auto* front = caf::actor_cast<caf::abstract_actor*>(actors.fronts.front());
  for (int i = 0; i < 3; ++i)
    ask_with_callback(i);
  // The request actor sends the lookups; then the cache's answers fill its mailbox, and
  // the stop comes behind them, ahead of the flush that the first answer will send.
  run_all_but(caf::actor_cast<caf::abstract_actor*>(actors.cache));
  run_all_but(front);
  ASSERT_TRUE(front_state().held.empty());
  caf::anon_send_exit(actors.fronts.front(), caf::exit_reason::user_shutdown);
  sched.run();
  ASSERT_EQ(delivered.size(), 3u) << "each query answered once";
  for (const auto& [index, with_row] : delivered)
    EXPECT_TRUE(with_row) << "query " << index << " had its row, not shutting_down";
}

} // namespace
