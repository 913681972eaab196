// The trie under a sliding window (Note [windowed KV]): KV W or more tokens above
// every lock goes even on locked paths, rows stay, a KV prefix is usable only when
// its last W-1 tokens hold KV, and KV never joins a run that starts below it.

#include <canopy/cache/token_trie.hpp>

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace canopy::cache {
namespace {

constexpr std::size_t kv_bytes = 10; // one token's KV

trie_config windowed(std::uint32_t window, std::size_t kv_tokens) {
  trie_config c;
  c.kv_window = window;
  c.kv_budget_bytes = kv_tokens * kv_bytes;
  return c;
}

token_seq tokens(std::size_t n, token_id first = 0) {
  token_seq s(n);
  std::iota(s.begin(), s.end(), first);
  return s;
}

row_ptr make_row() {
  const std::vector<float> values(4, -1.0f);
  return logprob_row::encode(values.data(), values.size(), row_dtype::float32);
}

// The handle of depth d's KV in these tests is 100 + d.
constexpr kv_handle handle_at(std::size_t depth) {
  return 100 + depth;
}

// Attaches KV and a row to path[from..to) in order, as storing one pass does; returns
// how many KV attaches were accepted.
std::size_t store(token_trie& t, const std::vector<node_id>& path, std::size_t from,
                  std::size_t to) {
  std::size_t accepted = 0;
  for (std::size_t i = from; i < to; ++i) {
    accepted += t.attach_kv(path[i], 0, handle_at(i + 1), kv_bytes) ? 1 : 0;
    EXPECT_TRUE(t.attach_logprobs(path[i], make_row()));
    t.check_invariants();
  }
  return accepted;
}

std::vector<std::size_t> depths_holding_kv(const token_trie& t,
                                           const std::vector<node_id>& path) {
  std::vector<std::size_t> depths;
  for (std::size_t i = 0; i < path.size(); ++i)
    if (t.kv(path[i], 0) != no_kv)
      depths.push_back(i + 1);
  return depths;
}

std::vector<kv_handle> released_handles(token_trie& t) {
  std::vector<kv_handle> out;
  for (const kv_release& r : t.take_released())
    out.push_back(r.handle);
  return out;
}

TEST(token_trie_window, kv_above_the_window_of_every_lock_goes_even_on_a_locked_path) {
  // W = 4 and room for 6 tokens of KV: a 12-token sequence, locked at its end, is
  // stored token by token (one long pass). Each attach past the budget drops the
  // oldest KV, which is W or more above the lock; every row stays.
  token_trie t(windowed(4, 6));
  const std::vector<node_id> path = t.path(t.insert(tokens(12).data(), 12));
  t.lock(path.back());
  EXPECT_EQ(store(t, path, 0, 12), 12u);
  EXPECT_EQ(depths_holding_kv(t, path), (std::vector<std::size_t>{7, 8, 9, 10, 11, 12}));
  EXPECT_EQ(released_handles(t), (std::vector<kv_handle>{101, 102, 103, 104, 105, 106}));
  EXPECT_EQ(t.stats().kv_evictions, 6u);
  EXPECT_EQ(t.stats().kv_peak_bytes[0], 6 * kv_bytes);
  EXPECT_EQ(t.stats().logprob_entries, 12u);
  EXPECT_EQ(t.stats().refused_attaches, 0u);

  // A pass continues from the last W-1 = 3 tokens' KV: depth 9 (7, 8, 9 hold KV) is
  // a usable prefix, depth 8 is not, and nothing above it holds KV.
  EXPECT_EQ(t.kv_prefixes(path[11])[0].length, 12u);
  EXPECT_EQ(t.kv_prefixes(path[11])[0].handle, handle_at(12));
  EXPECT_EQ(t.kv_prefixes(path[8])[0].length, 9u);
  EXPECT_EQ(t.kv_prefixes(path[7])[0].length, 0u);
  EXPECT_EQ(t.kv_prefixes(path[7])[0].handle, no_kv);
  const match_result m = t.match(tokens(12).data(), 12, 0, 11);
  EXPECT_EQ(m.kv[0].length, 11u);
  // A pass continues from depth 9 itself, not from depth 8, which holds KV too.
  EXPECT_TRUE(t.kv_continues(path[8]));
  EXPECT_NE(t.kv(path[7], 0), no_kv);
  EXPECT_FALSE(t.kv_continues(path[7]));
  EXPECT_FALSE(t.kv_continues(path[5]));
}

TEST(token_trie_window,
     without_a_window_the_same_locked_path_refuses_kv_past_the_budget) {
  // The contrast: full attention needs every token's KV, so the locked path keeps it
  // and the rest of the pass's KV is refused.
  trie_config c = windowed(0, 6);
  token_trie t(c);
  const std::vector<node_id> path = t.path(t.insert(tokens(12).data(), 12));
  t.lock(path.back());
  EXPECT_EQ(store(t, path, 0, 12), 6u);
  EXPECT_EQ(depths_holding_kv(t, path), (std::vector<std::size_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(t.stats().kv_evictions, 0u);
  EXPECT_TRUE(t.kv_continues(path[5])) << "KV is prefix-closed: any KV held continues";
  EXPECT_FALSE(t.kv_continues(path[6]));
}

TEST(token_trie_window, kv_within_the_window_of_any_lock_is_kept) {
  // Locks at depths 5 (a pass reading that prefix) and 12 keep depths 2-5 and 9-12;
  // with room for 8 tokens, storing the path drops 1, 6, 7 and 8, and then an attach
  // elsewhere is refused without evicting anything.
  token_trie t(windowed(4, 8));
  const std::vector<node_id> path = t.path(t.insert(tokens(12).data(), 12));
  t.lock(path[4]);
  t.lock(path.back());
  EXPECT_EQ(store(t, path, 0, 12), 12u);
  EXPECT_EQ(depths_holding_kv(t, path),
            (std::vector<std::size_t>{2, 3, 4, 5, 9, 10, 11, 12}));
  EXPECT_EQ(t.kv_prefixes(path[4])[0].length, 5u);
  released_handles(t);

  const token_seq other = tokens(1, 50);
  EXPECT_FALSE(t.attach_kv(t.insert(other.data(), 1), 0, 999, kv_bytes));
  EXPECT_EQ(t.stats().refused_attaches, 1u);
  EXPECT_EQ(t.stats().kv_entries[0], 8u);

  // Unlocking the prefix lock frees its window: the next attach evicts depth 2, the
  // oldest KV now outside every window.
  t.unlock(path[4]);
  EXPECT_TRUE(t.attach_kv(t.insert(other.data(), 1), 0, 999, kv_bytes));
  EXPECT_EQ(released_handles(t), (std::vector<kv_handle>{handle_at(2)}));
  t.check_invariants();
}

TEST(token_trie_window, a_match_uses_only_the_nodes_its_ends_window_covers) {
  // Two particles share a 6-token prompt and then differ for 4 tokens each (W = 4);
  // A is matched, then B. Under LRU the KV evicted first must be the prompt's, which
  // neither particle's window reads, not the window of A for having been matched
  // first (B's match passes through the prompt, but does not use it).
  token_trie t(windowed(4, 14));
  const token_seq a = {1, 2, 3, 4, 5, 6, 10, 11, 12, 13};
  const token_seq b = {1, 2, 3, 4, 5, 6, 20, 21, 22, 23};
  const std::vector<node_id> path_a = t.path(t.insert(a.data(), a.size()));
  const std::vector<node_id> path_b = t.path(t.insert(b.data(), b.size()));
  for (std::size_t i = 0; i < 10; ++i) {
    EXPECT_TRUE(t.attach_kv(path_a[i], 0, handle_at(i + 1), kv_bytes));
    if (i >= 6) {
      EXPECT_TRUE(t.attach_kv(path_b[i], 0, 200 + i, kv_bytes));
    }
  }
  t.match(a.data(), a.size());
  t.match(b.data(), b.size());
  const token_seq other = {40};
  EXPECT_TRUE(t.attach_kv(t.insert(other.data(), 1), 0, 999, kv_bytes));
  EXPECT_EQ(released_handles(t), (std::vector<kv_handle>{handle_at(1)}));
  EXPECT_EQ(t.kv_prefixes(path_a.back())[0].length, 10u);
  t.check_invariants();
}

TEST(token_trie_window, kv_never_joins_a_run_that_starts_below_it) {
  // W = 2 and room for 3: storing a 4-token path locked at its end drops depth 1's
  // KV, and KV elsewhere then drops depth 2's (the lock keeps 3 and 4).
  token_trie t(windowed(2, 3));
  const std::vector<node_id> path = t.path(t.insert(tokens(4).data(), 4));
  t.lock(path.back());
  EXPECT_EQ(store(t, path, 0, 4), 4u);
  EXPECT_EQ(depths_holding_kv(t, path), (std::vector<std::size_t>{2, 3, 4}));
  // Depth 2's KV builds on depth 1's that is gone: KV for depth 1 now would start a
  // run the worker could not walk from depth 2 (it links to the KV gone).
  EXPECT_FALSE(t.attach_kv(path[0], 0, 701, kv_bytes));
  const token_seq other = tokens(1, 50);
  EXPECT_TRUE(t.attach_kv(t.insert(other.data(), 1), 0, 702, kv_bytes));
  EXPECT_EQ(depths_holding_kv(t, path), (std::vector<std::size_t>{3, 4}));
  // With depth 2's KV gone, depth 1 may hold KV again (it starts a sequence), but
  // depth 2 may not while depth 3 builds on the depth-2 KV that is gone.
  EXPECT_TRUE(t.attach_kv(path[0], 0, 703, kv_bytes));
  EXPECT_FALSE(t.attach_kv(path[1], 0, 704, kv_bytes));
  EXPECT_EQ(depths_holding_kv(t, path), (std::vector<std::size_t>{1, 3, 4}));
  EXPECT_EQ(t.kv_prefixes(path[1])[0].length, 1u);
  t.check_invariants();
  // Once the KV below is gone, depth 2 takes KV again.
  t.unlock(path.back());
  t.clear_kv();
  EXPECT_TRUE(t.attach_kv(path[0], 0, 711, kv_bytes));
  EXPECT_TRUE(t.attach_kv(path[1], 0, 712, kv_bytes));
  t.check_invariants();
}

} // namespace
} // namespace canopy::cache
