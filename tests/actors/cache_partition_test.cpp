// Cache partitions through the production wiring (tenants, cache_salt): queries of two
// partitions never share a hit, a merged computation, a folded pass item or KV, while
// equal queries of one partition still do; cancelling and clearing find the caller's
// partition; an oversized partition name is refused and the engine keeps serving.

#include "pipeline_fixture.hpp"

#include <caf/scoped_actor.hpp>

#include <chrono>
#include <string>

using namespace std::chrono_literals;
using canopy::cache::token_seq;
using canopy::messages::errc;
namespace msg = canopy::messages;

namespace {

struct cache_partition_test : canopy::testing::pipeline_fixture {
  msg::query in(std::string partition, token_seq tokens) const {
    msg::query q;
    q.tokens = std::move(tokens);
    q.partition = std::move(partition);
    return q;
  }

  /// Lets the batch window (if any) pass and runs everything.
  void settle() {
    sched.run();
    sched.clock().advance_time(1000ms);
    sched.run();
  }

  std::vector<canopy::backends::pass_item> items_of_pass(std::size_t pass) {
    std::lock_guard<std::mutex> lock(probes->mutex);
    return probes->requests.at(pass).items;
  }

  void clear(std::string partitions) {
    caf::scoped_actor self{sys};
    self->send(actors.fronts.front(), msg::clear_atom::value, std::move(partitions));
    sched.run();
  }
};

TEST_F(cache_partition_test, equal_sequences_merge_within_a_partition_and_not_across) {
  config.flush_when_idle = false;
  config.batch_timeout_ms = 1000;
  start();
  auto a1 = ask(in("a", {5, 6}));
  auto b = ask(in("b", {5, 6}));
  auto a2 = ask(in("a", {5, 6}));
  settle();
  EXPECT_EQ(actors.metrics->merged_duplicates.load(), 1u) << "only a's two merge";
  ASSERT_EQ(probes->passes, 1);
  const auto items = items_of_pass(0);
  ASSERT_EQ(items.size(), 2u) << "one computation per partition";
  EXPECT_EQ(items[0].tokens, (token_seq{5, 6}));
  EXPECT_EQ(items[1].tokens, (token_seq{5, 6}));
  for (auto i : {a1, b, a2})
    EXPECT_TRUE(matches_reference(i, {5, 6}));
}

TEST_F(cache_partition_test, a_row_cached_in_one_partition_is_a_miss_in_another) {
  start();
  ask(in("tenant 1", {3, 4}));
  settle();
  ASSERT_EQ(probes->passes, 1);
  auto again = ask(in("tenant 1", {3, 4}));
  settle();
  EXPECT_EQ(probes->passes, 1) << "the same partition hits";
  EXPECT_EQ(actors.metrics->cache_hits.load(), 1u);
  auto other = ask(in("tenant 2", {3, 4}));
  auto shared = ask(token_seq{3, 4});
  settle();
  EXPECT_EQ(actors.metrics->cache_hits.load(), 1u) << "a hit crossed partitions";
  EXPECT_EQ(probes->passes, 2);
  for (auto i : {again, other, shared})
    EXPECT_TRUE(matches_reference(i, {3, 4}));
}

TEST_F(cache_partition_test, a_prefix_in_another_partition_is_neither_folded_nor_reused) {
  config.flush_when_idle = false;
  config.batch_timeout_ms = 1000;
  start();
  // One batch: {7} of b is a prefix of a's {7, 8, 9} but must not be read off a's item.
  auto longer = ask(in("a", {7, 8, 9}));
  auto prefix = ask(in("b", {7}));
  settle();
  ASSERT_EQ(probes->passes, 1);
  EXPECT_EQ(items_of_pass(0).size(), 2u);
  // a's KV of {7, 8, 9} is reused by a's continuation only.
  auto same = ask(in("a", {7, 8, 9, 10}));
  settle();
  auto other = ask(in("b", {7, 8, 9, 10}));
  settle();
  ASSERT_EQ(probes->passes, 3);
  const auto reused = items_of_pass(1);
  ASSERT_EQ(reused.size(), 1u);
  EXPECT_EQ(reused[0].prefix_length, 3u);
  EXPECT_EQ(reused[0].tokens, (token_seq{10}));
  const auto computed = items_of_pass(2);
  ASSERT_EQ(computed.size(), 1u);
  EXPECT_EQ(computed[0].prefix_length, 1u) << "b's own {7} KV, not a's {7, 8, 9}";
  EXPECT_EQ(computed[0].tokens, (token_seq{8, 9, 10}));
  EXPECT_TRUE(matches_reference(longer, {7, 8, 9}));
  EXPECT_TRUE(matches_reference(prefix, {7}));
  EXPECT_TRUE(matches_reference(same, {7, 8, 9, 10}));
  EXPECT_TRUE(matches_reference(other, {7, 8, 9, 10}));
}

TEST_F(cache_partition_test,
       a_cancellation_withdraws_the_query_of_the_callers_partition) {
  config.flush_when_idle = false;
  config.batch_timeout_ms = 1000;
  start();
  auto sink = sys.spawn([](caf::event_based_actor*) -> caf::behavior {
    return {[](msg::answer_atom, std::uint64_t, const msg::shared_logprobs&) {},
            [](msg::answer_atom, std::uint64_t, const caf::error&) {}};
  });
  caf::anon_send(actors.fronts.front(), msg::logprobs_atom::value, in("a", {9}),
                 std::uint64_t{1}, caf::actor_cast<msg::answer_sink>(sink));
  auto kept = ask(in("b", {9}));
  sched.run();
  caf::anon_send(actors.fronts.front(), msg::cancel_atom::value,
                 caf::actor_cast<msg::answer_sink>(sink), std::vector<std::uint64_t>{1});
  settle();
  ASSERT_EQ(probes->passes, 1);
  EXPECT_EQ(items_of_pass(0).size(), 1u) << "a's withdrawn query was still computed";
  EXPECT_TRUE(matches_reference(kept, {9}));
  caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
}

TEST_F(cache_partition_test, clearing_takes_only_the_partitions_its_prefix_names) {
  config.flush_when_idle = false;
  config.batch_timeout_ms = 1000;
  start();
  for (const char* partition : {"1\n", "1\nsalt", "2\n", ""})
    ask(in(partition, {11, 12}));
  settle();
  ASSERT_EQ(probes->passes, 1);
  clear("1\n");
  for (const char* partition : {"2\n", ""})
    ask(in(partition, {11, 12}));
  settle();
  EXPECT_EQ(probes->passes, 1) << "a partition the prefix does not name lost its row";
  ask(in("1\nsalt", {11, 12}));
  settle();
  EXPECT_EQ(probes->passes, 2) << "the cleared partition still hit";
}

TEST_F(cache_partition_test,
       an_oversized_partition_name_is_refused_and_the_engine_serves_on) {
  start();
  auto refused = ask(in(std::string(msg::max_partition_bytes + 1, 'x'), {1}));
  auto longest = ask(in(std::string(msg::max_partition_bytes, 'x'), {1}));
  settle();
  EXPECT_EQ(error_of(refused), errc::invalid_request);
  EXPECT_TRUE(matches_reference(longest, {1}));
}

} // namespace
