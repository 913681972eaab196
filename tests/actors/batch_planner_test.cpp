// The batch planner: folding prefixes, starting after the worker's KV, deferring
// entries that share uncached tokens, and choosing a worker.

#include <canopy/actors/batch_planner.hpp>

#include <gtest/gtest.h>

using canopy::actors::answer_ref;
using canopy::actors::choose_worker;
using canopy::actors::plan_batch;
using canopy::actors::plan_entry;
using canopy::actors::plan_options;
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
  auto plan = plan_batch({{&longest, kv_prefix{3, 30}}, {&shorter, kv_prefix{1, 10}}}, only_asked);
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

TEST(batch_planner, chooses_the_worker_holding_kv_for_most_entries) {
  std::vector<std::vector<kv_prefix>> kv = {
    {kv_prefix{0, 0}, kv_prefix{3, 1}},
    {kv_prefix{1, 2}, kv_prefix{0, 0}},
    {kv_prefix{0, 0}, kv_prefix{2, 3}},
  };
  EXPECT_EQ(choose_worker(kv, {0, 1}, {0, 0}), 1u);
  // A worker that is not a candidate (busy) is not chosen.
  EXPECT_EQ(choose_worker(kv, {0}, {0, 0}), 0u);
}

TEST(batch_planner, without_kv_anywhere_chooses_the_least_loaded) {
  std::vector<std::vector<kv_prefix>> kv = {{kv_prefix{}, kv_prefix{}, kv_prefix{}}};
  EXPECT_EQ(choose_worker(kv, {0, 1, 2}, {50, 10, 10}), 1u);
}

} // namespace
