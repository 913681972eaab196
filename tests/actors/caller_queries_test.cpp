// Queries a caller sends under its own ids to its own answer sink (the HTTP gateway's
// path): answers come back by id, cancellation by id answers at once and keeps
// abandoned work out of the passes, and the engine's metrics count what happened.

#include "pipeline_fixture.hpp"

#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <map>

using namespace std::chrono_literals;
using canopy::cache::token_seq;
using canopy::messages::errc;
namespace msg = canopy::messages;

namespace {

/// Records every answer a sink receives, by the caller's id.
struct recorded {
  std::map<std::uint64_t, caf::expected<msg::shared_logprobs>> answers;
  int deliveries = 0;
};

msg::answer_sink::behavior_type recording_sink(msg::answer_sink::pointer,
                                               std::shared_ptr<recorded> out) {
  return {
      [out](msg::answer_atom, std::uint64_t id, const msg::shared_logprobs& row) {
        ++out->deliveries;
        out->answers.emplace(id, row);
      },
      [out](msg::answer_atom, std::uint64_t id, const caf::error& e) {
        ++out->deliveries;
        out->answers.emplace(id, e);
      },
      [out](msg::answer_atom, const msg::answer_batch&) { ++out->deliveries; },
  };
}

struct caller_queries_test : canopy::testing::pipeline_fixture {
  std::shared_ptr<recorded> got = std::make_shared<recorded>();
  msg::answer_sink sink;

  void start_with_sink() {
    start();
    sink = sys.spawn(recording_sink, got);
  }

  void send_query(std::uint64_t id, token_seq tokens) {
    caf::anon_send(actors.fronts.front(), msg::logprobs_atom::value,
                   msg::query{std::move(tokens)}, id, sink);
  }

  errc error_of_id(std::uint64_t id) const {
    auto it = got->answers.find(id);
    if (it == got->answers.end() || it->second)
      return errc::none;
    return msg::code_of(it->second.error());
  }

  bool id_matches_reference(std::uint64_t id, const token_seq& tokens) const {
    auto it = got->answers.find(id);
    if (it == got->answers.end() || !it->second)
      return false;
    auto expected = canopy::backends::mock_logprobs(mock, tokens.data(), tokens.size());
    std::vector<float> values(expected.size());
    it->second->row->decode(values.data());
    return values == expected;
  }
};

TEST_F(caller_queries_test, answers_arrive_by_the_callers_ids) {
  start_with_sink();
  send_query(70, {1, 2});
  send_query(71, {3});
  send_query(72, {}); // rejected: still answered, by its id
  sched.run();
  EXPECT_TRUE(id_matches_reference(70, {1, 2}));
  EXPECT_TRUE(id_matches_reference(71, {3}));
  EXPECT_EQ(error_of_id(72), errc::empty_sequence);
  EXPECT_EQ(got->deliveries, 3);
}

TEST_F(caller_queries_test, a_cancelled_query_is_answered_at_once_and_not_computed) {
  config.flush_when_idle = false;
  config.batch_timeout_ms = 1000;
  start_with_sink();
  send_query(1, {5, 6});
  send_query(2, {7});
  auto other = ask(token_seq{7}); // another caller shares query 2's computation
  sched.run();
  caf::anon_send(actors.fronts.front(), msg::cancel_atom::value, sink,
                 std::vector<std::uint64_t>{1, 2, 99}); // 99 was never asked: ignored
  sched.run();
  EXPECT_EQ(error_of_id(1), errc::cancelled);
  EXPECT_EQ(error_of_id(2), errc::cancelled);
  sched.clock().advance_time(1000ms);
  sched.run();
  // {5, 6} had no other waiter: it never reached a pass. {7} still had one.
  ASSERT_EQ(probes->passes, 1);
  ASSERT_EQ(probes->requests.at(0).items.size(), 1u);
  EXPECT_EQ(probes->requests.at(0).items.at(0).tokens, (token_seq{7}));
  EXPECT_TRUE(matches_reference(other, {7}));
  EXPECT_EQ(got->deliveries, 2); // exactly one answer per query, the cancellation
}

TEST_F(caller_queries_test, cancelling_an_answered_query_changes_nothing) {
  start_with_sink();
  send_query(1, {4});
  sched.run();
  ASSERT_TRUE(id_matches_reference(1, {4}));
  caf::anon_send(actors.fronts.front(), msg::cancel_atom::value, sink,
                 std::vector<std::uint64_t>{1});
  sched.run();
  EXPECT_EQ(got->deliveries, 1);
  EXPECT_EQ(actors.metrics->snapshot().in_flight, 0u);
}

TEST_F(caller_queries_test, metrics_count_errors_by_code_latencies_batches_and_gauges) {
  config.flush_when_idle = false;
  config.batch_timeout_ms = 1000;
  start_with_sink();
  send_query(1, {});
  send_query(2, {1, 64}); // out of range for the 64-entry mock
  send_query(3, {1});
  send_query(4, {2});
  sched.run();
  auto waiting = actors.metrics->snapshot();
  EXPECT_EQ(waiting.queue_depth, 2u);
  EXPECT_EQ(waiting.in_flight, 2u);
  EXPECT_EQ(waiting.locked_nodes, 3u); // {1}, {2} and the root
  sched.clock().advance_time(1000ms);
  sched.run();
  auto s = actors.metrics->snapshot();
  EXPECT_EQ(s.queue_depth, 0u);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.locked_nodes, 0u);
  using code_count = std::pair<std::string, std::uint64_t>;
  EXPECT_EQ(s.errors_by_code,
            (std::vector<code_count>{{"empty_sequence", 1}, {"token_out_of_range", 1}}));
  EXPECT_EQ(s.batch_size.count, 1u);
  EXPECT_EQ(s.batch_size.counts.at(1), 1u); // one pass of 2 queries: bucket le=2
  EXPECT_EQ(s.latency_seconds.count, 2u);   // accepted queries, as they were answered
  // Both waited out the 1 s batch window on the test clock.
  EXPECT_GE(s.latency_seconds.sum, 2.0);
}

} // namespace
