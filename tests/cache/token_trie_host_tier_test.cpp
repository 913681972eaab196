// The trie's host tier (Note [host tier]): KV the device evicts is demoted while the
// host has room, the host evicts for good, and a locked path is promoted back.
#include <canopy/cache/token_trie.hpp>

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace canopy::cache {
namespace {

/// One worker: the device holds 3 entries of 10 bytes, the host `host` entries.
token_trie two_tiers(std::size_t host) {
  trie_config c;
  c.kv_budget_bytes = 30;
  c.kv_host_budget_bytes = host * 10;
  return token_trie(c);
}

/// KV for every token of `s` (handles base, base + 1, ...); the path's nodes.
std::vector<node_id> put(token_trie& t, const token_seq& s, kv_handle base) {
  const auto path = t.path(t.insert(s.data(), s.size()));
  for (std::size_t i = 0; i < path.size(); ++i)
    if (t.kv(path[i], 0) == no_kv) {
      EXPECT_TRUE(t.attach_kv(path[i], 0, base + i, 10));
    }
  return path;
}

TEST(token_trie_host_tier, the_device_demotes_leaf_first_and_the_host_drops_when_full) {
  auto t = two_tiers(2);
  const auto a = put(t, {1, 2, 3}, 100);
  const auto b = put(t, {7}, 200); // the device evicts a's leaf: demoted
  EXPECT_TRUE(t.kv_on_host(a[2], 0));
  EXPECT_EQ(t.take_demoted(), (std::vector<kv_release>{{0, 102}}));
  EXPECT_TRUE(t.take_released().empty());
  put(t, {8}, 300); // demotes a[1], older than {7} (its only child is on the host)
  put(t, {9}, 400); // demotes a[0]; the host is full: its candidate a[2] goes for good
  EXPECT_EQ(t.take_released(), (std::vector<kv_release>{{0, 102}}));
  EXPECT_EQ(t.stats().kv_demotions, 3u);
  EXPECT_EQ(t.stats().kv_host_bytes[0], 20u);
  EXPECT_EQ(t.stats().kv_bytes[0], 30u);
  const auto m = t.match(std::vector<token_id>{1, 2, 3}.data(), 3);
  EXPECT_EQ(m.kv[0].length, 2u) << "host KV counts as held";
  EXPECT_EQ(m.kv[0].handle, 101u);
  t.check_invariants();
  (void)b;
}

TEST(token_trie_host_tier, promotion_moves_a_locked_path_back_within_the_device_budget) {
  auto t = two_tiers(3);
  const auto a = put(t, {1, 2, 3}, 100);
  put(t, {7, 8, 9}, 200); // a is all on the host now
  for (const auto n : a)
    EXPECT_TRUE(t.kv_on_host(n, 0));
  t.lock(a[2]);
  EXPECT_EQ(t.promote_kv(a[2], 0), 3u);
  for (const auto n : a)
    EXPECT_FALSE(t.kv_on_host(n, 0));
  EXPECT_EQ(t.stats().kv_promotions, 3u);
  EXPECT_EQ(t.stats().kv_bytes[0], 30u) << "what was there went to the host";
  t.check_invariants();
  // Locked, the device has no room for another path: promotion stops at its top.
  const auto b = t.path(t.match(std::vector<token_id>{7, 8, 9}.data(), 3).node);
  t.lock(b[2]);
  EXPECT_EQ(t.promote_kv(b[2], 0), 0u);
  EXPECT_TRUE(t.kv_on_host(b[0], 0));
  // No KV is attached under host KV: a pass reads its prefix promoted.
  const auto c = t.insert(std::vector<token_id>{7, 8, 9, 4}.data(), 4);
  EXPECT_FALSE(t.attach_kv(c, 0, 500, 10));
  t.check_invariants();
}

TEST(token_trie_host_tier, promoted_prefixes_end_above_the_kv_left_on_the_host) {
  auto t = two_tiers(3);
  const auto a = put(t, {1, 2}, 100);
  const auto b = put(t, {7, 8, 9}, 200); // a is all on the host now
  ASSERT_TRUE(t.kv_on_host(a[0], 0) && t.kv_on_host(a[1], 0));
  t.lock(a[1]);
  const auto prefix_a = t.promoted_kv_prefixes(a[1]);
  EXPECT_EQ(prefix_a[0].length, 2u);
  EXPECT_EQ(prefix_a[0].handle, 101u);
  EXPECT_FALSE(t.kv_on_host(a[0], 0) || t.kv_on_host(a[1], 0));
  EXPECT_TRUE(t.kv_on_host(b[1], 0) && t.kv_on_host(b[2], 0)) << "made room";
  // Locked, a and b's first token fill the device: b's prefix ends above its host KV.
  t.lock(b[2]);
  const auto prefix_b = t.promoted_kv_prefixes(b[2]);
  EXPECT_EQ(prefix_b[0].length, 1u);
  EXPECT_EQ(prefix_b[0].handle, 200u);
  EXPECT_TRUE(t.kv_on_host(b[1], 0));
  t.check_invariants();
}

TEST(token_trie_host_tier, not_with_a_sliding_window) {
  trie_config c;
  c.kv_window = 4;
  c.kv_host_budget_bytes = 100;
  EXPECT_THROW(token_trie{c}, std::invalid_argument);
}

} // namespace
} // namespace canopy::cache
