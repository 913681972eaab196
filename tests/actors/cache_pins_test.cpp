// The cache's pins under a sliding window: a pass continuing a prefix that ends more
// than one token above the query's node reads KV outside the window that the
// query's own lock keeps, so prepare locks that prefix's end until the query leaves.

#include <canopy/actors/cache_actor.hpp>

#include <gtest/gtest.h>

#include <numeric>

namespace canopy::actors {
namespace {

constexpr std::size_t kv_bytes = 10;

struct windowed_cache : ::testing::Test {
  cache_state st;
  std::vector<cache::node_id> path; // a 12-token sequence, KV on its first 6 tokens

  windowed_cache() {
    st.options.trie.kv_window = 4;
    st.options.trie.kv_budget_bytes = 8 * kv_bytes;
    st.trie = std::make_unique<cache::token_trie>(st.options.trie);
    cache::token_seq tokens(12);
    std::iota(tokens.begin(), tokens.end(), 0);
    path = st.trie->path(st.trie->insert(tokens.data(), tokens.size()));
    for (std::size_t i = 0; i < 6; ++i)
      EXPECT_TRUE(st.trie->attach_kv(path[i], 0, 100 + i, kv_bytes));
  }

  // Attaches KV to `n` fresh one-token sequences, evicting what is not kept.
  void crowd(cache::token_id n) {
    for (cache::token_id t = 0; t < n; ++t) {
      const cache::token_id token = 1000 + next_++;
      EXPECT_TRUE(
          st.trie->attach_kv(st.trie->insert(&token, 1), 0, 5000 + next_, kv_bytes));
    }
  }

  bool holds_kv(std::size_t depth) const {
    return st.trie->kv(path[depth - 1], 0) != cache::no_kv;
  }

  cache::token_id next_ = 0;
};

TEST_F(windowed_cache, a_prefix_above_the_querys_window_is_pinned_until_released) {
  st.trie->lock(path[11]); // a query for all 12 tokens, as its lookup locks it
  const auto entry = st.prepare(path[11], false);
  ASSERT_EQ(entry.kv.size(), 1u);
  EXPECT_EQ(entry.kv[0].length, 6u);
  ASSERT_EQ(entry.pins, std::vector<cache::node_id>{path[5]});
  // Depths 3-6 (what a pass from depth 6 reads, and more) stay however much KV comes.
  crowd(20);
  for (std::size_t d = 3; d <= 6; ++d)
    EXPECT_TRUE(holds_kv(d)) << "depth " << d;
  EXPECT_FALSE(holds_kv(1));
  st.trie->check_invariants();
  // Released with the query, the pin keeps nothing.
  st.trie->unlock(entry.pins[0]);
  crowd(20);
  for (std::size_t d = 1; d <= 6; ++d)
    EXPECT_FALSE(holds_kv(d)) << "depth " << d;
  st.trie->check_invariants();
}

TEST_F(windowed_cache, a_query_continuing_its_parent_needs_no_pin) {
  st.trie->lock(path[6]); // depth 7: its pass continues from depth 6, in its window
  const auto entry = st.prepare(path[6], false);
  EXPECT_EQ(entry.kv[0].length, 6u);
  EXPECT_TRUE(entry.pins.empty());
  crowd(20);
  for (std::size_t d = 4; d <= 6; ++d)
    EXPECT_TRUE(holds_kv(d)) << "depth " << d;
}

} // namespace
} // namespace canopy::actors
