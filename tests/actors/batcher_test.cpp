// The batcher and its neighbours driven on the deterministic scheduler with the
// production wiring: merging, flush rules, KV reuse, failures, cancellation,
// deadlines and eviction under pressure (workers coming and going:
// worker_membership_test.cpp).

#include "pipeline_fixture.hpp"

#include <canopy/actors/batcher_actor.hpp>

#include <caf/send.hpp>

#include <chrono>

using namespace std::chrono_literals;
using canopy::cache::token_seq;
using canopy::messages::errc;

namespace {

struct batcher_test : canopy::testing::pipeline_fixture {};

TEST_F(batcher_test, two_identical_queries_inside_the_window_run_one_pass) {
  config.flush_when_idle = false;
  config.batch_timeout_ms = 20;
  start();
  auto a = ask(token_seq{1, 2, 3});
  auto b = ask(token_seq{1, 2, 3});
  sched.run();
  EXPECT_EQ(probes->passes, 0);
  sched.clock().advance_time(19ms);
  sched.run();
  EXPECT_EQ(probes->passes, 0);
  EXPECT_FALSE(answered(a));
  sched.clock().advance_time(1ms);
  sched.run();
  EXPECT_EQ(probes->passes, 1);
  EXPECT_TRUE(matches_reference(a, {1, 2, 3}));
  EXPECT_TRUE(matches_reference(b, {1, 2, 3}));
  EXPECT_EQ(actors.metrics->merged_duplicates, 1u);
  EXPECT_EQ(probes->tokens, 3u);
}

TEST_F(batcher_test, flushes_when_the_batch_is_full) {
  config.flush_when_idle = false;
  config.batch_size = 3;
  config.batch_timeout_ms = 1000;
  start();
  auto a = ask(token_seq{1, 2});
  auto b = ask(token_seq{3, 4});
  sched.run();
  EXPECT_EQ(probes->passes, 0);
  auto c = ask(token_seq{5, 6});
  sched.run();
  EXPECT_EQ(probes->passes, 1);
  EXPECT_EQ(probes->items, 3);
  EXPECT_TRUE(matches_reference(a, {1, 2}));
  EXPECT_TRUE(matches_reference(b, {3, 4}));
  EXPECT_TRUE(matches_reference(c, {5, 6}));
}

TEST_F(batcher_test, timeout_counts_from_the_first_waiting_query) {
  config.flush_when_idle = false;
  config.batch_timeout_ms = 20;
  start();
  auto a = ask(token_seq{7});
  sched.run();
  sched.clock().advance_time(15ms);
  sched.run();
  auto b = ask(token_seq{8});
  sched.run();
  sched.clock().advance_time(5ms); // 20 ms after the first, 5 ms after the second
  sched.run();
  EXPECT_EQ(probes->passes, 1);
  EXPECT_TRUE(matches_reference(a, {7}));
  EXPECT_TRUE(matches_reference(b, {8}));
}

TEST_F(batcher_test, flush_when_idle_dispatches_without_waiting) {
  config.batch_timeout_ms = 1000;
  start();
  auto a = ask(token_seq{4, 5});
  sched.run();
  EXPECT_EQ(probes->passes, 1);
  EXPECT_TRUE(matches_reference(a, {4, 5}));
}

TEST_F(batcher_test, queries_arriving_together_leave_together_for_an_idle_worker) {
  config.batch_timeout_ms = 1000;
  start();
  // Sent at once, as the particles of an SMC step: the first must not leave alone.
  auto a = ask(token_seq{1, 2});
  auto b = ask(token_seq{3, 4});
  auto c = ask(token_seq{5, 6});
  sched.run();
  EXPECT_EQ(probes->passes, 1);
  EXPECT_EQ(probes->items, 3);
  EXPECT_TRUE(matches_reference(a, {1, 2}));
  EXPECT_TRUE(matches_reference(b, {3, 4}));
  EXPECT_TRUE(matches_reference(c, {5, 6}));
}

// Note [idle gather]: after slow passes, an idle worker's batch waits a 64th of a pass
// for queries still on their way; after fast ones (the test above) it leaves at once.
TEST_F(batcher_test,
       after_slow_passes_an_idle_worker_waits_a_64th_of_a_pass_for_the_rest) {
  config.batch_timeout_ms = 1000;
  start();
  auto warm = ask(token_seq{7, 7});
  ASSERT_TRUE(run_until_pass_queued());
  sched.clock().advance_time(64ms); // the pass takes 64 ms: the average becomes 16 ms
  sched.run();
  ASSERT_TRUE(answered(warm));
  ASSERT_EQ(probes->passes, 1);
  auto a = ask(token_seq{1, 2});
  sched.run();
  EXPECT_EQ(probes->passes, 1) << "a lone query waits 16 ms / 64 = 250 us";
  sched.clock().advance_time(200us);
  auto b = ask(token_seq{3, 4}); // still on its way when a arrived
  sched.run();
  EXPECT_EQ(probes->passes, 1);
  sched.clock().advance_time(50us);
  sched.run();
  EXPECT_EQ(probes->passes, 2);
  EXPECT_EQ(probes->items, 3) << "the warm-up's item, then a and b together";
  EXPECT_TRUE(matches_reference(a, {1, 2}));
  EXPECT_TRUE(matches_reference(b, {3, 4}));
}

TEST_F(batcher_test, a_duplicate_of_a_dispatched_query_joins_it) {
  start();
  auto a = ask(token_seq{9, 9, 9});
  ASSERT_TRUE(run_until_pass_queued());
  auto b = ask(token_seq{9, 9, 9});
  run_all_but_worker(); // b reaches the batcher while a's pass is still in flight
  EXPECT_EQ(probes->passes, 0);
  sched.run();
  EXPECT_EQ(probes->passes, 1);
  EXPECT_TRUE(matches_reference(a, {9, 9, 9}));
  EXPECT_TRUE(matches_reference(b, {9, 9, 9}));
  EXPECT_EQ(actors.metrics->merged_duplicates, 1u);
}

TEST_F(batcher_test, equal_suffixes_under_different_prefixes_are_different_queries) {
  config.flush_when_idle = false;
  config.batch_timeout_ms = 5;
  start();
  ask(token_seq{1, 2});
  ask(token_seq{3, 2});
  sched.run();
  sched.clock().advance_time(5ms);
  sched.run();
  auto a = ask(token_seq{1, 2, 5}); // suffix [5] after different cached prefixes
  auto b = ask(token_seq{3, 2, 5});
  sched.run();
  sched.clock().advance_time(5ms);
  sched.run();
  EXPECT_TRUE(matches_reference(a, {1, 2, 5}));
  EXPECT_TRUE(matches_reference(b, {3, 2, 5}));
  EXPECT_EQ(actors.metrics->merged_duplicates, 0u);
}

TEST_F(batcher_test, a_failing_pass_reaches_every_waiter_and_the_engine_keeps_serving) {
  start();
  probes->fail = true;
  auto a = ask(token_seq{1, 2});
  auto b = ask(token_seq{1, 2});
  auto c = ask(token_seq{3});
  sched.run();
  EXPECT_EQ(error_of(a), errc::backend_failure);
  EXPECT_EQ(error_of(b), errc::backend_failure);
  EXPECT_EQ(error_of(c), errc::backend_failure);
  EXPECT_NE(canopy::messages::message_of(replies[a]->error()).find("injected failure"),
            std::string::npos);
  probes->fail = false;
  auto d = ask(token_seq{1, 2});
  sched.run();
  EXPECT_TRUE(matches_reference(d, {1, 2}));
}

TEST_F(batcher_test, cancel_answers_every_waiting_query) {
  config.flush_when_idle = false;
  config.batch_timeout_ms = 1000;
  start();
  auto a = ask(token_seq{1});
  auto b = ask(token_seq{2});
  auto c = ask(token_seq{1});
  sched.run();
  caf::anon_send(actors.batcher, canopy::messages::cancel_atom::value);
  sched.run();
  EXPECT_EQ(error_of(a), errc::cancelled);
  EXPECT_EQ(error_of(b), errc::cancelled);
  EXPECT_EQ(error_of(c), errc::cancelled);
  sched.clock().advance_time(1000ms);
  sched.run();
  EXPECT_EQ(probes->passes, 0);
  auto d = ask(token_seq{2});
  sched.run();
  sched.clock().advance_time(1000ms);
  sched.run();
  EXPECT_TRUE(matches_reference(d, {2}));
}

TEST_F(batcher_test, a_deadline_reaches_the_caller_and_the_query_is_not_computed) {
  config.flush_when_idle = false;
  config.batch_timeout_ms = 100;
  start();
  canopy::messages::query q{{1, 2, 3}, 0, false, std::chrono::milliseconds(10)};
  auto a = ask(q);
  sched.run();
  sched.clock().advance_time(10ms);
  sched.run();
  EXPECT_EQ(error_of(a), errc::deadline_exceeded);
  sched.clock().advance_time(90ms);
  sched.run();
  EXPECT_EQ(probes->passes, 0);
}

TEST_F(batcher_test, each_deadline_fires_at_its_own_time_whatever_the_order) {
  config.flush_when_idle = false;
  config.batch_timeout_ms = 1000;
  start();
  using canopy::messages::query;
  auto late = ask(query{{1}, 0, false, std::chrono::milliseconds(100)});
  auto early = ask(query{{2}, 0, false, std::chrono::milliseconds(10)});
  auto never = ask(token_seq{3});
  sched.run();
  sched.clock().advance_time(10ms);
  sched.run();
  EXPECT_EQ(error_of(early), errc::deadline_exceeded);
  EXPECT_FALSE(answered(late));
  sched.clock().advance_time(89ms);
  sched.run();
  EXPECT_FALSE(answered(late));
  sched.clock().advance_time(1ms);
  sched.run();
  EXPECT_EQ(error_of(late), errc::deadline_exceeded);
  EXPECT_FALSE(answered(never));
  sched.clock().advance_time(900ms); // the batch window: the one left is computed
  sched.run();
  EXPECT_TRUE(matches_reference(never, {3}));
  EXPECT_EQ(probes->items, 1);
}

TEST_F(batcher_test, queries_with_deadlines_keep_one_deadline_timer) {
  config.query_timeout_ms = 60000;
  start();
  for (int i = 0; i < 20; ++i)
    ask(token_seq{1, i + 1});
  sched.run();
  for (std::size_t i = 0; i < 20; ++i)
    EXPECT_TRUE(matches_reference(i, {1, static_cast<canopy::cache::token_id>(i + 1)}));
  sched.clock().advance_time(5ms); // past any batch window
  sched.run();
  // The pass watchdog and the first query's deadline: no timer per query waits out
  // its timeout.
  EXPECT_EQ(sched.clock().schedule().size(), 2u);
}

TEST_F(batcher_test, invalid_queries_are_rejected_with_a_clear_error) {
  start();
  auto empty = ask(token_seq{});
  auto out_of_range = ask(token_seq{1, 64});
  auto negative = ask(token_seq{-1});
  auto too_long = ask(token_seq(33, 1));
  sched.run();
  EXPECT_EQ(error_of(empty), errc::empty_sequence);
  EXPECT_EQ(error_of(out_of_range), errc::token_out_of_range);
  EXPECT_EQ(error_of(negative), errc::token_out_of_range);
  EXPECT_EQ(error_of(too_long), errc::sequence_too_long);
  EXPECT_NE(canopy::messages::message_of(replies[out_of_range]->error())
                .find("token id 64 at position 1"),
            std::string::npos);
  EXPECT_EQ(probes->passes, 0);
  auto ok = ask(token_seq{1});
  sched.run();
  EXPECT_TRUE(matches_reference(ok, {1}));
}

TEST_F(batcher_test, extending_a_sequence_computes_only_the_new_token) {
  start();
  auto a = ask(token_seq{1, 2, 3, 4});
  sched.run();
  auto b = ask(token_seq{1, 2, 3, 4, 5});
  sched.run();
  EXPECT_TRUE(matches_reference(a, {1, 2, 3, 4}));
  EXPECT_TRUE(matches_reference(b, {1, 2, 3, 4, 5}));
  ASSERT_EQ(probes->requests.size(), 2u);
  const auto& second = probes->requests[1].items.at(0);
  EXPECT_EQ(second.prefix_length, 4u);
  EXPECT_EQ(second.tokens, (token_seq{5}));
  EXPECT_EQ(probes->tokens, 5u);
}

TEST_F(batcher_test, prefixes_in_one_batch_fold_into_one_item) {
  config.flush_when_idle = false;
  config.batch_size = 3;
  start();
  auto a = ask(token_seq{1});
  auto b = ask(token_seq{1, 2});
  auto c = ask(token_seq{1, 2, 3});
  sched.run();
  EXPECT_EQ(probes->passes, 1);
  EXPECT_EQ(probes->items, 1);
  EXPECT_EQ(probes->tokens, 3u);
  EXPECT_TRUE(matches_reference(a, {1}));
  EXPECT_TRUE(matches_reference(b, {1, 2}));
  EXPECT_TRUE(matches_reference(c, {1, 2, 3}));
}

TEST_F(batcher_test, branches_sharing_uncached_tokens_compute_them_once) {
  config.flush_when_idle = false;
  config.batch_size = 2;
  start();
  auto a = ask(token_seq{1, 2, 3});
  auto b = ask(token_seq{1, 2, 4});
  sched.run(); // first pass computes [1,2,3]; [1,2,4] waits for its prefix's KV
  sched.clock().advance_time(std::chrono::milliseconds(3));
  sched.run();
  EXPECT_TRUE(matches_reference(a, {1, 2, 3}));
  EXPECT_TRUE(matches_reference(b, {1, 2, 4}));
  EXPECT_EQ(probes->tokens, 4u);
  EXPECT_EQ(actors.metrics->deferred, 1u);
}

TEST_F(batcher_test, a_pass_past_its_timeout_fails_its_batch_and_its_late_kv_is_freed) {
  config.pass_timeout_ms = 50;
  start();
  auto a = ask(token_seq{1, 2, 3});
  ASSERT_TRUE(run_until_pass_queued());
  // The worker has not run the pass yet when its time is up: the batcher fails the
  // batch first, then the late pass runs and nobody stores its KV.
  EXPECT_EQ(sched.clock().advance_time(std::chrono::milliseconds(50)), 1u);
  ASSERT_TRUE(sched.prioritize(actors.batcher));
  sched.run_once();
  EXPECT_EQ(probes->passes, 0);
  sched.run();
  EXPECT_EQ(error_of(a), errc::backend_failure);
  EXPECT_EQ(probes->passes, 1);
  EXPECT_EQ(probes->kv_entries, 0u);
  auto b = ask(token_seq{1, 2, 3});
  sched.run();
  EXPECT_TRUE(matches_reference(b, {1, 2, 3}));
}

TEST_F(batcher_test, passes_one_after_another_keep_one_watchdog_timer) {
  start();
  for (int i = 0; i < 20; ++i) {
    auto q = ask(token_seq{1, i + 1});
    sched.run();
    EXPECT_TRUE(matches_reference(q, {1, i + 1}));
  }
  EXPECT_EQ(probes->passes, 20);
  // The one armed for the first pass: no timer per batch waits out pass_timeout.
  EXPECT_EQ(sched.clock().schedule().size(), 1u);
}

TEST_F(batcher_test, the_front_and_the_workers_describe_the_model) {
  start(2);
  std::vector<canopy::backends::model_info> infos;
  auto record = [&](caf::event_based_actor* self, auto handle) {
    self->request(handle, caf::infinite, canopy::messages::info_atom::value)
        .then([&](const canopy::backends::model_info& info) { infos.push_back(info); });
  };
  sys.spawn([&](caf::event_based_actor* self) { record(self, actors.fronts[0]); });
  for (const auto& w : actors.workers)
    sys.spawn([&, w](caf::event_based_actor* self) { record(self, w); });
  sched.run();
  ASSERT_EQ(infos.size(), 3u);
  for (const auto& info : infos) {
    EXPECT_EQ(info.vocab_size, mock.vocab_size);
    EXPECT_EQ(info.context_length, mock.context_length);
    EXPECT_EQ(info.kv_bytes_per_token, mock.kv_bytes_per_token);
  }
}

TEST_F(batcher_test, eviction_under_pressure_never_changes_an_answer) {
  const std::uint64_t row_bytes = mock.vocab_size * sizeof(float);
  config.logprob_budget_bytes = 3 * row_bytes;
  config.kv_budget_bytes = 8 * mock.kv_bytes_per_token;
  start();
  std::vector<token_seq> workload;
  for (int i = 0; i < 40; ++i)
    workload.push_back({i % 5, (i * 7) % 11, i % 3, i});
  auto check = [&] {
    for (const auto& tokens : workload) {
      auto r = ask(tokens);
      sched.run();
      ASSERT_TRUE(matches_reference(r, tokens))
          << "sequence " << ::testing::PrintToString(tokens);
      ASSERT_LE(
          actors.metrics->cache_count<&canopy::engine_stats::logprob_bytes>().load(),
          config.logprob_budget_bytes);
      ASSERT_LE(actors.metrics->worker(0).kv_bytes, config.kv_budget_bytes);
    }
  };
  check();
  check(); // the same queries again, after their rows and KV were evicted
  EXPECT_GT(
      actors.metrics->cache_count<&canopy::engine_stats::logprob_evictions>().load(), 0u);
  EXPECT_GT(actors.metrics->cache_count<&canopy::engine_stats::kv_evictions>().load(),
            0u);
}

} // namespace
