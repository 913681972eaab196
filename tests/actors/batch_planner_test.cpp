// The batch planner: folding prefixes, starting after the worker's KV, deferring
// entries that share uncached tokens, and routing each entry to a worker.

#include <canopy/actors/batch_planner.hpp>

#include <gtest/gtest.h>

using canopy::actors::answer_ref;
using canopy::actors::entry_route;
using canopy::actors::plan_batch;
using canopy::actors::plan_entry;
using canopy::actors::plan_options;
using canopy::actors::reuse_tokens;
using canopy::actors::route_entries;
using canopy::actors::routing_entry;
using canopy::actors::routing_view;
using canopy::cache::kv_prefix;
using canopy::cache::token_seq;

namespace {

const plan_options every_row{true, true};
const plan_options only_asked{false, true};

TEST(batch_planner, a_lone_entry_computes_its_whole_sequence) {
  token_seq s{4, 5, 6};
  auto plan = plan_batch({{&s, {}}}, every_row);
  ASSERT_EQ(plan.pass.items.size(), 1u);
  EXPECT_EQ(plan.pass.items[0].tokens, s);
  EXPECT_EQ(plan.pass.items[0].prefix, canopy::cache::no_kv);
  EXPECT_EQ(plan.pass.items[0].rows, (std::vector<std::uint32_t>{0, 1, 2}));
  EXPECT_EQ(plan.answers[0].item, 0u);
  EXPECT_EQ(plan.answers[0].row, 2u);
}

TEST(batch_planner, an_item_starts_after_the_workers_kv_prefix) {
  token_seq s{4, 5, 6, 7};
  auto plan = plan_batch({{&s, kv_prefix{2, 99}}}, only_asked);
  ASSERT_EQ(plan.pass.items.size(), 1u);
  EXPECT_EQ(plan.pass.items[0].prefix, 99u);
  EXPECT_EQ(plan.pass.items[0].prefix_length, 2u);
  EXPECT_EQ(plan.pass.items[0].tokens, (token_seq{6, 7}));
  EXPECT_EQ(plan.pass.items[0].rows, (std::vector<std::uint32_t>{1}));
}

TEST(batch_planner, prefixes_fold_into_the_longest_entry) {
  token_seq longest{1, 2, 3}, middle{1, 2}, shortest{1};
  auto plan = plan_batch({{&longest, {}}, {&shortest, {}}, {&middle, {}}}, only_asked);
  ASSERT_EQ(plan.pass.items.size(), 1u);
  EXPECT_EQ(plan.pass.items[0].tokens, longest);
  EXPECT_EQ(plan.pass.items[0].rows, (std::vector<std::uint32_t>{0, 1, 2}));
  EXPECT_EQ(plan.answers[0].row, 2u);
  EXPECT_EQ(plan.answers[1].row, 0u);
  EXPECT_EQ(plan.answers[2].row, 1u);
  EXPECT_TRUE(plan.deferred.empty());
}

TEST(batch_planner, a_folded_chain_starts_at_its_shortest_kv_prefix) {
  token_seq longest{1, 2, 3, 4}, shorter{1, 2};
  // The longer sequence has KV for three tokens, the shorter (capped) for one.
  auto plan = plan_batch({{&longest, kv_prefix{3, 30}}, {&shorter, kv_prefix{1, 10}}},
                         only_asked);
  ASSERT_EQ(plan.pass.items.size(), 1u);
  EXPECT_EQ(plan.pass.items[0].prefix, 10u);
  EXPECT_EQ(plan.pass.items[0].tokens, (token_seq{2, 3, 4}));
  EXPECT_EQ(plan.pass.items[0].rows, (std::vector<std::uint32_t>{0, 2}));
}

TEST(batch_planner, equal_sequences_share_one_row) {
  token_seq a{8, 9}, b{8, 9};
  auto plan = plan_batch({{&a, {}}, {&b, {}}}, only_asked);
  ASSERT_EQ(plan.pass.items.size(), 1u);
  EXPECT_EQ(plan.pass.items[0].rows.size(), 1u);
  EXPECT_EQ(plan.answers[0].row, plan.answers[1].row);
}

TEST(batch_planner, branches_sharing_uncached_tokens_are_deferred) {
  token_seq a{1, 2, 3}, b{1, 2, 4}, c{7};
  auto plan = plan_batch({{&a, {}}, {&b, {}}, {&c, {}}}, only_asked);
  ASSERT_EQ(plan.pass.items.size(), 2u);
  EXPECT_EQ(plan.deferred, (std::vector<std::uint32_t>{1}));
  EXPECT_EQ(plan.answers[1].item, answer_ref::deferred);
}

TEST(batch_planner, without_kv_reuse_nothing_is_deferred) {
  token_seq a{1, 2, 3}, b{1, 2, 4};
  auto plan = plan_batch({{&a, {}}, {&b, {}}}, plan_options{false, false});
  EXPECT_EQ(plan.pass.items.size(), 2u);
  EXPECT_TRUE(plan.deferred.empty());
}

TEST(batch_planner, without_kv_reuse_items_ignore_cached_kv_and_keep_none) {
  token_seq a{1, 2, 3};
  auto plan = plan_batch({{&a, kv_prefix{2, 5}}}, plan_options{true, false});
  ASSERT_EQ(plan.pass.items.size(), 1u);
  const auto& item = plan.pass.items[0];
  EXPECT_EQ(item.tokens, a) << "the whole sequence is recomputed";
  EXPECT_EQ(item.prefix, canopy::cache::no_kv);
  EXPECT_EQ(item.prefix_length, 0u);
  EXPECT_FALSE(item.keep_kv);
  EXPECT_EQ(plan.answers[0].row, 2u);
}

TEST(batch_planner, branches_whose_shared_prefix_is_cached_run_together) {
  token_seq a{1, 2, 3}, b{1, 2, 4};
  auto plan = plan_batch({{&a, kv_prefix{2, 5}}, {&b, kv_prefix{2, 5}}}, only_asked);
  EXPECT_EQ(plan.pass.items.size(), 2u);
  EXPECT_TRUE(plan.deferred.empty());
  std::size_t computed = 0;
  for (const auto& item : plan.pass.items)
    computed += item.tokens.size();
  EXPECT_EQ(computed, 2u);
}

TEST(batch_planner, entries_of_two_partitions_neither_fold_nor_defer) {
  token_seq longest{1, 2, 3}, prefix{1, 2}, branch{1, 2, 9};
  // Without partitions {1, 2} folds into {1, 2, 3} and {1, 2, 9} waits for the pass.
  auto plan = plan_batch({{&longest, {}, "a"}, {&prefix, {}, "b"}, {&branch, {}, "c"}},
                         only_asked);
  ASSERT_EQ(plan.pass.items.size(), 3u);
  EXPECT_TRUE(plan.deferred.empty());
  for (std::uint32_t e = 0; e < 3; ++e) // each entry is answered by an item of its own
    EXPECT_EQ(plan.pass.items.at(plan.answers[e].item).tokens,
              (std::vector<token_seq>{longest, prefix, branch}[e]));

  // Within one partition they still do.
  auto shared = plan_batch({{&longest, {}, "a"}, {&prefix, {}, "a"}, {&branch, {}, "a"}},
                           only_asked);
  EXPECT_EQ(shared.pass.items.size(), 1u);
  EXPECT_EQ(shared.deferred, (std::vector<std::uint32_t>{2}));
}

/// Routing entries of `seqs` with KV prefixes `kv` (none: no KV anywhere).
std::vector<routing_entry> entries_of(const std::vector<token_seq>& seqs,
                                      std::vector<std::vector<kv_prefix>> kv = {}) {
  std::vector<routing_entry> out;
  for (std::size_t i = 0; i < seqs.size(); ++i)
    out.push_back(
        {&seqs[i], i < kv.size() ? kv[i] : std::vector<kv_prefix>{}, std::nullopt});
  return out;
}

token_seq counting(std::int32_t from, std::int32_t n) {
  token_seq s;
  for (std::int32_t i = 0; i < n; ++i)
    s.push_back(from + i);
  return s;
}

TEST(batch_planner, each_entry_goes_to_the_worker_holding_its_longest_kv_prefix) {
  const std::vector<token_seq> seqs = {counting(1, 12), counting(20, 12),
                                       counting(40, 12)};
  const auto routes =
      route_entries(entries_of(seqs, {{kv_prefix{0, 0}, kv_prefix{10, 1}},
                                      {kv_prefix{9, 2}, kv_prefix{0, 0}},
                                      {kv_prefix{8, 4}, kv_prefix{10, 3}}}),
                    {{0, 1}, {0, 1}, {0, 0}});
  EXPECT_EQ(routes[0].worker, 1u);
  EXPECT_EQ(routes[1].worker, 0u);
  EXPECT_EQ(routes[2].worker, 1u) << "the longer prefix wins";
  for (const auto& r : routes)
    EXPECT_FALSE(r.waits);
}

TEST(batch_planner, an_entry_waits_for_its_busy_kv_worker_when_the_prefix_is_worth_it) {
  const std::vector<token_seq> seqs = {counting(1, 12), counting(1, 12), {4, 5}};
  // Worker 1 is busy (not ready), worker 0 idle.
  const auto routes =
      route_entries(entries_of(seqs, {{kv_prefix{0, 0}, kv_prefix{reuse_tokens, 9}},
                                      {kv_prefix{0, 0}, kv_prefix{reuse_tokens - 1, 8}},
                                      {}}),
                    {{0}, {0, 1}, {0, 64}});
  EXPECT_TRUE(routes[0].waits) << "computing 8 tokens again is worse than waiting";
  EXPECT_EQ(routes[0].worker, 1u);
  EXPECT_FALSE(routes[1].waits)
      << "7 tokens (a BOS) are computed again where there is room";
  EXPECT_EQ(routes[1].worker, 0u);
  EXPECT_FALSE(routes[2].waits) << "no KV anywhere: the idle worker takes it";
  EXPECT_EQ(routes[2].worker, 0u);
  // A draining worker (not active) holds KV nobody waits for.
  const auto draining = route_entries(
      entries_of(seqs, {{kv_prefix{0, 0}, kv_prefix{10, 9}}}), {{0}, {0}, {0, 0}});
  EXPECT_FALSE(draining[0].waits);
  EXPECT_EQ(draining[0].worker, 0u);
}

TEST(batch_planner, an_entry_sharing_a_running_pass_prefix_waits_for_its_worker) {
  const std::vector<token_seq> seqs = {counting(1, 12)};
  auto entries = entries_of(seqs);
  entries[0].computing = 1u;
  const auto routes = route_entries(entries, {{0}, {0, 1}, {0, 0}});
  EXPECT_EQ(routes[0].worker, 1u);
  EXPECT_TRUE(routes[0].waits);
  // With room for a second pass (passes in flight), it still waits for the results:
  // sent now, it would compute the running pass's tokens again.
  const auto room = route_entries(entries, {{0, 1}, {0, 1}, {0, 0}});
  EXPECT_EQ(room[0].worker, 1u);
  EXPECT_TRUE(room[0].waits);
}

TEST(batch_planner, entries_without_kv_spread_in_families_over_the_least_loaded) {
  // Two families (first tokens 1 and 50): each stays whole, and they go to different
  // workers, the less loaded first.
  const std::vector<token_seq> seqs = {counting(1, 10), counting(50, 10), counting(1, 9),
                                       counting(50, 11)};
  const auto routes =
      route_entries(entries_of(seqs), {{0, 1, 2}, {0, 1, 2}, {50, 10, 12}});
  EXPECT_EQ(routes[0].worker, 1u);
  EXPECT_EQ(routes[2].worker, 1u);
  EXPECT_EQ(routes[1].worker, 2u);
  EXPECT_EQ(routes[3].worker, 2u);
  // Busy workers are counted too: a family goes to the one with the least in hand,
  // and waits for it.
  const auto busy = route_entries(entries_of(seqs), {{0}, {0, 1, 2}, {8, 20, 600}});
  EXPECT_EQ(busy[0].worker, 0u);
  EXPECT_FALSE(busy[0].waits);
  EXPECT_EQ(busy[1].worker, 1u) << "worker 0 has 8 + 19 in hand now, busy worker 1 20";
  EXPECT_TRUE(busy[1].waits);
  // Sharing a first token cached nowhere makes a family: it is computed once.
  const std::vector<token_seq> bos = {{1, 5, 6}, {1, 7, 8}, {2, 7, 8, 9}};
  const auto apart = route_entries(entries_of(bos), {{0, 1}, {0, 1}, {0, 0}});
  EXPECT_EQ(apart[0].worker, apart[1].worker);
  EXPECT_NE(apart[1].worker, apart[2].worker);
  // With no active worker, every entry waits for any.
  const auto none_active = route_entries(entries_of(seqs), {{}, {}, {0, 0, 0}});
  for (const auto& r : none_active) {
    EXPECT_TRUE(r.waits);
    EXPECT_FALSE(r.worker);
  }
}

} // namespace
