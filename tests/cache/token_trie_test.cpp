#include <canopy/cache/token_trie.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <vector>

namespace canopy::cache {
namespace {

constexpr std::size_t row_vocab = 4;
constexpr std::size_t row_bytes = row_vocab * 4; // float32 rows

row_ptr make_row(float fill = -1.0f, std::size_t vocab = row_vocab) {
  const std::vector<float> values(vocab, fill);
  return logprob_row::encode(values.data(), vocab, row_dtype::float32);
}

trie_config config_with(std::size_t rows, std::size_t kv_bytes = 1000,
                        eviction_policy policy = eviction_policy::lru,
                        std::uint32_t workers = 1) {
  trie_config c;
  c.logprob_budget_bytes = rows * row_bytes;
  c.kv_budget_bytes = kv_bytes;
  c.policy = policy;
  c.workers = workers;
  return c;
}

node_id insert(token_trie& t, const token_seq& s, std::int32_t priority = 0) {
  return t.insert(s.data(), s.size(), priority);
}

match_result match(token_trie& t, const token_seq& s,
                   std::uint32_t kv_cap = std::numeric_limits<std::uint32_t>::max()) {
  return t.match(s.data(), s.size(), 0, kv_cap);
}

// Inserts `s` and stores a fresh row after it; the row is returned for comparisons.
row_ptr put_row(token_trie& t, const token_seq& s) {
  row_ptr row = make_row();
  EXPECT_TRUE(t.attach_logprobs(insert(t, s), row));
  return row;
}

bool has_row(token_trie& t, const token_seq& s) {
  return match(t, s).logprobs != nullptr;
}

// Attaches KV for every token of `s` on `worker` (handles base, base+1, ...).
void put_kv_path(token_trie& t, const token_seq& s, kv_handle base, std::size_t bytes,
                 worker_id worker = 0) {
  const std::vector<node_id> nodes = t.path(insert(t, s));
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (t.kv(nodes[i], worker) == no_kv) {
      EXPECT_TRUE(t.attach_kv(nodes[i], worker, base + i, bytes));
    }
}

std::vector<kv_handle> released_handles(token_trie& t) {
  std::vector<kv_handle> handles;
  for (const kv_release& r : t.take_released())
    handles.push_back(r.handle);
  std::sort(handles.begin(), handles.end());
  return handles;
}

TEST(token_trie, insert_creates_nodes_and_match_follows_them) {
  token_trie t(config_with(8));
  const node_id leaf = insert(t, {1, 2, 3});
  EXPECT_EQ(t.stats().nodes, 4u);
  EXPECT_EQ(insert(t, {1, 2, 3}), leaf);
  EXPECT_EQ(t.stats().nodes, 4u);

  const std::vector<node_id> path = t.path(leaf);
  ASSERT_EQ(path.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(t.depth(path[i]), i + 1);
    EXPECT_EQ(t.token(path[i]), static_cast<token_id>(i + 1));
    EXPECT_EQ(t.parent(path[i]), i == 0 ? root_node : path[i - 1]);
  }

  const match_result longer = match(t, {1, 2, 3, 4});
  EXPECT_EQ(longer.node, leaf);
  EXPECT_EQ(longer.length, 3u);
  EXPECT_EQ(longer.logprobs, nullptr);
  EXPECT_EQ(match(t, {1, 2}).node, path[1]);
  EXPECT_EQ(match(t, {1, 2}).length, 2u);
  const match_result none = match(t, {7, 1});
  EXPECT_EQ(none.node, root_node);
  EXPECT_EQ(none.length, 0u);
  EXPECT_TRUE(t.path(root_node).empty());
  EXPECT_EQ(t.path(leaf, 1), (std::vector<node_id>{path[1], path[2]}));
  EXPECT_TRUE(t.path(leaf, 3).empty());
  EXPECT_THROW(t.path(leaf, 4), std::out_of_range);
  EXPECT_THROW(t.insert(nullptr, 0), std::invalid_argument);
  t.check_invariants();
}

TEST(token_trie, extend_continues_from_where_a_match_ended) {
  token_trie t(config_with(8));
  const node_id prompt = insert(t, {1, 2});
  const token_seq query{1, 2, 3, 4};
  const match_result m = match(t, query);
  ASSERT_EQ(m.node, prompt);
  const node_id leaf = t.extend(m.node, query.data() + m.length, query.size() - m.length);
  EXPECT_EQ(t.stats().nodes, 5u);
  EXPECT_EQ(leaf, insert(t, query)); // the same nodes insert() reaches from the root
  EXPECT_EQ(t.parent(t.parent(leaf)), prompt);
  EXPECT_EQ(t.extend(leaf, nullptr, 0), leaf); // nothing missing: the node itself
  EXPECT_EQ(t.extend(root_node, query.data(), 1), t.path(prompt)[0]);
  EXPECT_THROW(t.extend(99, query.data(), 1), std::out_of_range);
  t.check_invariants();
}

TEST(token_trie, row_is_returned_only_for_the_whole_sequence) {
  token_trie t(config_with(8));
  const row_ptr row = put_row(t, {1, 2});
  EXPECT_EQ(match(t, {1, 2}).logprobs, row);
  EXPECT_EQ(match(t, {1}).logprobs, nullptr);       // a prefix: another row
  EXPECT_EQ(match(t, {1, 2, 3}).logprobs, nullptr); // longer than what exists
  EXPECT_EQ(t.logprobs(match(t, {1, 2}).node), row);
  t.check_invariants();
}

TEST(token_trie, attaching_a_second_row_keeps_the_first) {
  token_trie t(config_with(8));
  const row_ptr first = put_row(t, {1});
  EXPECT_TRUE(t.attach_logprobs(insert(t, {1}), make_row(-2.0f)));
  EXPECT_EQ(match(t, {1}).logprobs, first);
  EXPECT_EQ(t.stats().logprob_entries, 1u);
  EXPECT_THROW(t.attach_logprobs(insert(t, {2}), nullptr), std::invalid_argument);
  EXPECT_THROW(t.attach_logprobs(root_node, make_row()), std::invalid_argument);
}

TEST(token_trie, match_refreshes_recency_so_lru_keeps_the_matched_row) {
  token_trie t(config_with(2));
  put_row(t, {1});
  put_row(t, {2});
  match(t, {1});
  put_row(t, {3}); // evicts {2}, the least recently used
  EXPECT_TRUE(has_row(t, {1}));
  EXPECT_FALSE(has_row(t, {2}));
  EXPECT_TRUE(has_row(t, {3}));
  EXPECT_EQ(t.stats().logprob_evictions, 1u);
  t.check_invariants();
}

TEST(token_trie, locked_nodes_are_neither_evicted_nor_removed) {
  token_trie t(config_with(2));
  const node_id a = insert(t, {1, 1});
  ASSERT_TRUE(t.attach_logprobs(a, make_row()));
  put_row(t, {2});
  t.lock(a);
  EXPECT_EQ(t.lock_count(a), 1u);
  EXPECT_EQ(t.lock_count(t.parent(a)), 1u);
  t.lock(a);
  EXPECT_EQ(t.lock_count(a), 2u);
  // Ancestors count children in use, not locks: {1} has one child in use.
  EXPECT_EQ(t.lock_count(t.parent(a)), 1u);
  EXPECT_EQ(t.lock_count(root_node), 1u);

  put_row(t, {3}); // {1,1} is the oldest, but locked: {2} goes
  EXPECT_TRUE(t.exists(a));
  EXPECT_NE(t.logprobs(a), nullptr);
  EXPECT_FALSE(has_row(t, {2}));
  t.clear();
  EXPECT_NE(t.logprobs(a), nullptr);

  t.unlock(a);
  t.unlock(a);
  EXPECT_EQ(t.lock_count(a), 0u);
  EXPECT_THROW(t.unlock(a), std::logic_error);
  put_row(t, {4});
  put_row(t, {5}); // now {1,1} can go
  EXPECT_FALSE(t.exists(a));
  t.check_invariants();
}

TEST(token_trie, eviction_is_leaf_first) {
  // FIFO would evict the oldest node, {1}; leaf-first makes it wait for its children.
  token_trie t(config_with(3, 1000, eviction_policy::fifo));
  put_row(t, {1});
  put_row(t, {1, 2});
  put_row(t, {1, 3});
  put_row(t, {9}); // evicts {1,2}: {1} still has a child with a row
  EXPECT_TRUE(has_row(t, {1}));
  EXPECT_FALSE(has_row(t, {1, 2}));
  EXPECT_TRUE(has_row(t, {1, 3}));
  put_row(t, {8}); // evicts {1,3}, {1}'s last child holding a row
  EXPECT_TRUE(has_row(t, {1}));
  EXPECT_FALSE(has_row(t, {1, 3}));
  put_row(t, {7}); // only now {1}
  EXPECT_FALSE(has_row(t, {1}));
  EXPECT_TRUE(has_row(t, {9}) && has_row(t, {8}) && has_row(t, {7}));
  EXPECT_EQ(t.stats().logprob_evictions, 3u);
  t.check_invariants();
}

TEST(token_trie, child_holding_only_kv_does_not_shield_its_parents_row) {
  token_trie t(config_with(1, 1000, eviction_policy::fifo));
  put_row(t, {1});
  put_kv_path(t, {1, 2}, 10, 8); // {1,2} holds KV but no row
  put_row(t, {5});
  EXPECT_FALSE(has_row(t, {1}));
  EXPECT_EQ(match(t, {1, 2}).kv[0].length, 2u); // the KV stayed
  t.check_invariants();
}

TEST(token_trie, attach_never_evicts_the_targets_ancestors) {
  // {1} is the FIFO-oldest candidate, but the new row goes under it.
  token_trie t(config_with(2, 16, eviction_policy::fifo));
  put_row(t, {1});
  put_row(t, {2});
  put_row(t, {1, 5});
  EXPECT_TRUE(has_row(t, {1}));
  EXPECT_FALSE(has_row(t, {2}));
  EXPECT_TRUE(has_row(t, {1, 5}));

  // KV: the parent's KV is what the new entry builds on.
  put_kv_path(t, {3}, 100, 8);
  put_kv_path(t, {4}, 200, 8);
  EXPECT_TRUE(t.attach_kv(insert(t, {3, 6}), 0, 300, 8));
  EXPECT_NE(t.kv(insert(t, {3}), 0), no_kv);
  EXPECT_EQ(released_handles(t), (std::vector<kv_handle>{200}));
  t.check_invariants();
}

TEST(token_trie, kv_is_prefix_closed) {
  token_trie t(config_with(4, 1000, eviction_policy::lru, 2));
  const node_id deep = insert(t, {1, 2});
  EXPECT_FALSE(t.attach_kv(deep, 0, 7, 8)); // {1} lacks KV on worker 0
  EXPECT_EQ(t.kv(deep, 0), no_kv);
  const node_id top = t.parent(deep);
  EXPECT_TRUE(t.attach_kv(top, 0, 6, 8));   // the root's children need no parent KV
  EXPECT_FALSE(t.attach_kv(deep, 1, 7, 8)); // worker 1 still lacks {1}
  EXPECT_TRUE(t.attach_kv(deep, 0, 7, 8));
  EXPECT_FALSE(t.attach_kv(deep, 0, 8, 8)); // already holds KV there
  EXPECT_EQ(t.kv(deep, 0), 7u);
  EXPECT_EQ(t.stats().kv_entries[0], 2u);
  EXPECT_EQ(t.stats().kv_bytes[0], 16u);
  EXPECT_EQ(t.stats().refused_attaches, 0u); // refusals for the prefix are not "no room"
  EXPECT_TRUE(t.take_released().empty());    // the caller still owns refused handles
  EXPECT_THROW(t.attach_kv(deep, 2, 9, 8), std::out_of_range);
  EXPECT_THROW(t.attach_kv(deep, 1, no_kv, 8), std::invalid_argument);
  t.check_invariants();
}

TEST(token_trie, kv_eviction_is_leaf_first_and_queues_releases) {
  token_trie t(config_with(1, 24, eviction_policy::fifo));
  put_kv_path(t, {1, 2, 3}, 10, 8); // handles 10, 11, 12 fill the budget
  EXPECT_TRUE(t.attach_kv(insert(t, {5}), 0, 50, 8));
  // The FIFO-oldest entry is {1}, but only the leaf {1,2,3} may go.
  EXPECT_EQ(match(t, {1, 2, 3}).kv[0].length, 2u);
  EXPECT_EQ(released_handles(t), (std::vector<kv_handle>{12}));
  EXPECT_TRUE(t.take_released().empty()); // each release is handed out once
  EXPECT_TRUE(t.attach_kv(insert(t, {6}), 0, 60, 8));
  EXPECT_EQ(released_handles(t), (std::vector<kv_handle>{11}));
  EXPECT_EQ(t.stats().kv_evictions, 2u);
  t.check_invariants();
}

TEST(token_trie, match_reports_kv_prefix_per_worker_up_to_the_cap) {
  token_trie t(config_with(4, 1000, eviction_policy::lru, 3));
  put_kv_path(t, {1, 2, 3}, 10, 8, 0);
  put_kv_path(t, {1}, 20, 8, 1);
  const match_result full = match(t, {1, 2, 3, 4});
  EXPECT_EQ(full.length, 3u);
  ASSERT_EQ(full.kv.size(), 3u);
  EXPECT_EQ(full.kv[0].length, 3u);
  EXPECT_EQ(full.kv[0].handle, 12u);
  EXPECT_EQ(full.kv[1].length, 1u);
  EXPECT_EQ(full.kv[1].handle, 20u);
  EXPECT_EQ(full.kv[2].length, 0u); // worker 2 holds nothing
  EXPECT_EQ(full.kv[2].handle, no_kv);

  // A query that needs the row after its last token caps at n-1.
  const match_result capped = match(t, {1, 2, 3}, 2);
  EXPECT_EQ(capped.length, 3u);
  EXPECT_EQ(capped.kv[0].length, 2u);
  EXPECT_EQ(capped.kv[0].handle, 11u);
  const match_result zero = match(t, {1, 2}, 0);
  EXPECT_EQ(zero.kv[0].length, 0u);
  EXPECT_EQ(zero.kv[0].handle, no_kv);
  // Never beyond what matched: {1,2} is matched, {1,2,3}'s KV is not reported.
  EXPECT_EQ(match(t, {1, 2, 9}).kv[0].length, 2u);
  t.check_invariants();
}

TEST(token_trie, kv_prefixes_of_a_node_are_what_a_match_ending_there_reports) {
  token_trie t(config_with(4, 1000, eviction_policy::lru, 3));
  put_kv_path(t, {1, 2}, 10, 8, 0);
  put_kv_path(t, {1}, 20, 8, 1);
  const node_id deep = insert(t, {1, 2, 3, 4});
  const std::vector<kv_prefix> kv = t.kv_prefixes(deep);
  ASSERT_EQ(kv.size(), 3u);
  EXPECT_EQ(kv[0].length, 2u);
  EXPECT_EQ(kv[0].handle, 11u);
  EXPECT_EQ(kv[1].length, 1u);
  EXPECT_EQ(kv[1].handle, 20u);
  EXPECT_EQ(kv[2].length, 0u);
  EXPECT_EQ(kv[2].handle, no_kv);
  const match_result m = match(t, {1, 2, 3, 4});
  for (worker_id w = 0; w < 3; ++w) {
    EXPECT_EQ(kv[w].length, m.kv[w].length);
    EXPECT_EQ(kv[w].handle, m.kv[w].handle);
  }
  EXPECT_EQ(t.kv_prefixes(root_node)[0].length, 0u);
  EXPECT_THROW(t.kv_prefixes(99), std::out_of_range);
}

TEST(token_trie, locked_nodes_counts_the_nodes_in_use) {
  token_trie t(config_with(4));
  const node_id a = insert(t, {1, 2});
  const node_id b = insert(t, {1, 3});
  EXPECT_EQ(t.stats().locked_nodes, 0u);
  t.lock(a); // a, {1} and the root
  EXPECT_EQ(t.stats().locked_nodes, 3u);
  t.lock(b); // the path is shared from {1} up
  EXPECT_EQ(t.stats().locked_nodes, 4u);
  t.lock(a);
  EXPECT_EQ(t.stats().locked_nodes, 4u);
  t.unlock(a);
  t.unlock(a);
  EXPECT_EQ(t.stats().locked_nodes, 3u);
  t.check_invariants();
  t.unlock(b);
  EXPECT_EQ(t.stats().locked_nodes, 0u);
  t.check_invariants();
}

TEST(token_trie, dropping_kv_keeps_rows_and_the_other_way_round) {
  token_trie t(config_with(1, 16));
  put_kv_path(t, {1}, 10, 8);
  const row_ptr row = put_row(t, {1});
  t.clear_kv();
  EXPECT_EQ(match(t, {1}).logprobs, row);
  EXPECT_EQ(match(t, {1}).kv[0].length, 0u);
  EXPECT_EQ(released_handles(t), (std::vector<kv_handle>{10}));

  put_kv_path(t, {1}, 11, 8);
  put_row(t, {2}); // evicts {1}'s row; its KV and the node stay
  EXPECT_EQ(match(t, {1}).logprobs, nullptr);
  EXPECT_EQ(match(t, {1}).length, 1u);
  EXPECT_EQ(match(t, {1}).kv[0].handle, 11u);
  t.check_invariants();
}

TEST(token_trie, both_budgets_hold_after_every_operation) {
  trie_config c = config_with(3, 40, eviction_policy::lru, 2);
  token_trie t(c);
  for (token_id i = 0; i < 200; ++i) {
    const token_seq s = {i % 7, i % 5, i % 3};
    const node_id n = insert(t, s);
    t.attach_logprobs(n, make_row(-1.0f, 1 + static_cast<std::size_t>(i % 5)));
    const std::vector<node_id> path = t.path(n);
    for (std::size_t d = 0; d < path.size(); ++d)
      t.attach_kv(path[d], static_cast<worker_id>(i % 2), 1000 + 10 * i + d,
                  1 + static_cast<std::size_t>(i % 11));
    EXPECT_LE(t.stats().logprob_bytes, c.logprob_budget_bytes);
    EXPECT_LE(t.stats().kv_bytes[0], c.kv_budget_bytes);
    EXPECT_LE(t.stats().kv_bytes[1], c.kv_budget_bytes);
    t.check_invariants();
  }
  EXPECT_GT(t.stats().logprob_evictions, 0u);
  EXPECT_GT(t.stats().kv_evictions, 0u);
}

TEST(token_trie, oversized_attach_is_refused_without_evicting) {
  token_trie t(config_with(2, 16));
  put_row(t, {1});
  put_kv_path(t, {1}, 10, 8);
  const node_id n = insert(t, {2});
  t.lock(n);
  EXPECT_FALSE(t.attach_logprobs(n, make_row(-1.0f, 3 * row_vocab)));
  EXPECT_FALSE(t.attach_kv(n, 0, 20, 17));
  EXPECT_EQ(t.stats().refused_attaches, 2u);
  EXPECT_EQ(t.stats().logprob_evictions, 0u);
  EXPECT_EQ(t.stats().kv_evictions, 0u);
  EXPECT_TRUE(has_row(t, {1}));
  EXPECT_TRUE(t.take_released().empty());
  t.unlock(n);
  EXPECT_FALSE(t.exists(n)); // held nothing once unlocked: removed
  t.check_invariants();
}

TEST(token_trie, attach_is_refused_when_everything_else_is_locked) {
  token_trie t(config_with(2, 16));
  const node_id a = insert(t, {1}), b = insert(t, {2});
  t.lock(a);
  t.lock(b);
  ASSERT_TRUE(t.attach_logprobs(a, make_row()));
  ASSERT_TRUE(t.attach_logprobs(b, make_row()));
  ASSERT_TRUE(t.attach_kv(a, 0, 1, 8));
  ASSERT_TRUE(t.attach_kv(b, 0, 2, 8));
  const node_id c = insert(t, {3});
  t.lock(c); // as a caller does while computing: a refusal must not remove it
  EXPECT_FALSE(t.attach_logprobs(c, make_row()));
  EXPECT_FALSE(t.attach_kv(c, 0, 3, 8));
  EXPECT_EQ(t.stats().refused_attaches, 2u);
  EXPECT_EQ(t.stats().logprob_bytes, 2 * row_bytes);
  EXPECT_EQ(t.stats().kv_bytes[0], 16u);
  EXPECT_TRUE(t.take_released().empty());
  t.check_invariants();

  t.unlock(b); // one unlocked holder is enough room
  const node_id d = insert(t, {4});
  EXPECT_TRUE(t.attach_logprobs(d, make_row()));
  EXPECT_TRUE(t.attach_kv(d, 0, 4, 8));
  EXPECT_FALSE(t.exists(b)); // lost both resources, so it was removed
  EXPECT_EQ(released_handles(t), (std::vector<kv_handle>{2}));
  t.check_invariants();
}

TEST(token_trie, entry_limit_evicts_the_least_recently_used_row) {
  // genlm-backend's OutputCache(maxsize=3): the fourth row pushes out the oldest.
  trie_config c = config_with(1000);
  c.logprob_max_entries = 3;
  token_trie t(c);
  put_row(t, {1});
  put_row(t, {2});
  put_row(t, {3});
  put_row(t, {4});
  EXPECT_EQ(t.stats().logprob_entries, 3u);
  EXPECT_FALSE(has_row(t, {1}));
  // A lookup refreshes an entry: {2} is used, so {3} is now the oldest.
  EXPECT_TRUE(has_row(t, {2}));
  put_row(t, {5});
  EXPECT_TRUE(has_row(t, {2}));
  EXPECT_FALSE(has_row(t, {3}));
  EXPECT_EQ(t.stats().logprob_evictions, 2u);
  t.check_invariants();
}

TEST(token_trie, clear_and_clear_kv_leave_locked_nodes_intact) {
  token_trie t(config_with(8, 1000, eviction_policy::lru, 2));
  put_kv_path(t, {1, 2}, 10, 8, 0);
  put_kv_path(t, {1, 2}, 20, 8, 1);
  const row_ptr locked_row = put_row(t, {1, 2});
  put_kv_path(t, {3}, 30, 8, 0);
  put_row(t, {3});
  const node_id locked = insert(t, {1, 2});
  t.lock(locked);

  t.clear_kv();
  EXPECT_EQ(t.kv(locked, 0), 11u);
  EXPECT_EQ(t.kv(t.parent(locked), 1), 20u); // ancestors are locked too
  EXPECT_TRUE(has_row(t, {3}));
  EXPECT_EQ(match(t, {3}).kv[0].length, 0u);
  EXPECT_EQ(released_handles(t), (std::vector<kv_handle>{30}));

  t.clear();
  EXPECT_EQ(t.logprobs(locked), locked_row);
  EXPECT_EQ(t.kv(locked, 1), 21u);
  EXPECT_EQ(match(t, {3}).length, 0u); // unlocked and emptied: removed
  EXPECT_EQ(t.stats().nodes, 3u);
  t.check_invariants();

  t.unlock(locked);
  t.clear();
  EXPECT_EQ(t.stats().nodes, 1u);
  EXPECT_EQ(t.stats().logprob_bytes, 0u);
  EXPECT_EQ(released_handles(t), (std::vector<kv_handle>{10, 11, 20, 21}));
  t.check_invariants();
}

TEST(token_trie, forget_worker_drops_its_kv_even_when_locked_without_releases) {
  token_trie t(config_with(8, 16, eviction_policy::lru, 2));
  put_kv_path(t, {1}, 10, 8, 0);
  put_kv_path(t, {1}, 20, 8, 1);
  put_kv_path(t, {2}, 21, 8, 1);
  const node_id locked = insert(t, {1});
  t.lock(locked);
  put_kv_path(t, {3}, 22, 8, 1); // evicts {2} on worker 1: a queued release
  t.forget_worker(1);
  EXPECT_EQ(t.kv(locked, 1), no_kv);
  EXPECT_EQ(t.kv(locked, 0), 10u);
  EXPECT_EQ(t.stats().kv_entries[1], 0u);
  EXPECT_EQ(t.stats().kv_bytes[1], 0u);
  EXPECT_TRUE(t.take_released().empty()); // nobody is left to free them
  EXPECT_EQ(match(t, {3}).length, 0u);
  EXPECT_THROW(t.forget_worker(2), std::out_of_range);
  t.check_invariants();
}

TEST(token_trie, empty_nodes_are_removed_and_their_ids_recycled) {
  token_trie t(config_with(1));
  const node_id leaf = insert(t, {1, 2, 3});
  const std::vector<node_id> old_path = t.path(leaf);
  t.lock(leaf);
  t.unlock(leaf); // held nothing: the whole chain goes at once
  EXPECT_EQ(t.stats().nodes, 1u);
  EXPECT_EQ(t.stats().nodes_removed, 3u);
  for (node_id id : old_path) {
    EXPECT_FALSE(t.exists(id));
    EXPECT_THROW(t.depth(id), std::out_of_range);
  }

  const node_id again = insert(t, {4, 5, 6});
  std::vector<node_id> new_path = t.path(again);
  std::vector<node_id> sorted_old = old_path;
  std::sort(new_path.begin(), new_path.end());
  std::sort(sorted_old.begin(), sorted_old.end());
  EXPECT_EQ(new_path, sorted_old);

  // Evicting the only row removes its node and the parent it leaves empty; a
  // sibling holding something stops the removal.
  put_kv_path(t, {4}, 40, 8);
  ASSERT_TRUE(t.attach_logprobs(again, make_row()));
  put_row(t, {7});
  EXPECT_FALSE(t.exists(again));
  EXPECT_EQ(match(t, {4, 5, 6}).length, 1u);
  EXPECT_EQ(t.stats().nodes, 3u); // root, {4}, {7}
  t.check_invariants();
}

TEST(token_trie, priority_policy_evicts_low_priority_first) {
  token_trie t(config_with(2, 1000, eviction_policy::priority));
  ASSERT_TRUE(t.attach_logprobs(insert(t, {1}, 5), make_row()));
  ASSERT_TRUE(t.attach_logprobs(insert(t, {2}, -1), make_row()));
  t.match(token_seq{2}.data(), 1, 9); // a high-priority caller lifts {2}
  ASSERT_TRUE(t.attach_logprobs(insert(t, {3}, 7), make_row()));
  EXPECT_FALSE(has_row(t, {1}));
  EXPECT_TRUE(has_row(t, {2}));
  t.check_invariants();
}

TEST(token_trie, lfu_policy_evicts_the_least_matched_row) {
  token_trie t(config_with(2, 1000, eviction_policy::lfu));
  put_row(t, {1});
  put_row(t, {2});
  match(t, {1});
  match(t, {1});
  match(t, {2}); // {2} is the most recent but has fewer hits
  put_row(t, {3});
  EXPECT_TRUE(has_row(t, {1}));
  EXPECT_FALSE(has_row(t, {2}));
}

TEST(token_trie, each_worker_has_its_own_kv_budget) {
  token_trie t(config_with(8, /*kv_bytes=*/64));
  const worker_id small = t.add_worker(16);
  EXPECT_EQ(small, 1u);
  EXPECT_EQ(t.workers(), 2u);
  EXPECT_EQ(t.kv_budget(0), 64u);
  EXPECT_EQ(t.kv_budget(small), 16u);
  // Four 8-byte tokens fit worker 0; worker 1 keeps two at a time, evicting.
  put_kv_path(t, {1, 2, 3, 4}, 100, 8, 0);
  EXPECT_EQ(t.stats().kv_bytes[0], 32u);
  put_kv_path(t, {1, 2}, 200, 8, small);
  EXPECT_EQ(t.stats().kv_bytes[small], 16u);
  const node_id third = insert(t, {1, 2, 3});
  EXPECT_FALSE(t.attach_kv(third, small, 300, 8))
      << "its whole prefix is needed and locked by it";
  t.lock(insert(t, {5}));
  EXPECT_TRUE(t.attach_kv(insert(t, {5}), small, 301, 8));
  EXPECT_LE(t.stats().kv_bytes[small], 16u);
  EXPECT_EQ(t.stats().kv_bytes[0], 32u) << "worker 0 lost nothing to worker 1's budget";
  t.unlock(insert(t, {5}));
  t.check_invariants();
}

TEST(token_trie, a_worker_gets_a_new_budget_only_when_it_holds_no_kv) {
  token_trie t(config_with(8, /*kv_bytes=*/64, eviction_policy::lru, /*workers=*/0));
  EXPECT_EQ(t.workers(), 0u);
  const worker_id w = t.add_worker(32);
  put_kv_path(t, {1, 2}, 100, 8, w);
  EXPECT_THROW(t.set_kv_budget(w, 8), std::logic_error);
  t.forget_worker(w); // lost: it comes back empty
  t.set_kv_budget(w, 8);
  EXPECT_EQ(t.kv_budget(w), 8u);
  put_kv_path(t, {1}, 200, 8, w);
  EXPECT_FALSE(t.attach_kv(insert(t, {1, 2}), w, 201, 8));
  EXPECT_THROW(t.kv_budget(w + 1), std::out_of_range);
  t.check_invariants();
}

TEST(token_trie, accessors_reject_dead_nodes) {
  token_trie t(config_with(1));
  EXPECT_FALSE(t.exists(42));
  EXPECT_THROW(t.lock(42), std::out_of_range);
  EXPECT_THROW(t.logprobs(42), std::out_of_range);
  EXPECT_THROW(t.kv(root_node, 1), std::out_of_range);
  EXPECT_THROW(t.path(42), std::out_of_range);
  EXPECT_TRUE(t.exists(root_node));
}

} // namespace
} // namespace canopy::cache
