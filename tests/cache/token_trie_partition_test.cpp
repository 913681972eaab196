// Partitions of the token trie (tenants, cache_salt): equal tokens in two partitions
// share nothing (rows, KV, statistics), a partition's root comes and goes with its
// nodes, budgets and eviction span all partitions, and bulk drops can take only the
// partitions whose names start with a prefix.

#include <canopy/cache/token_trie.hpp>

#include <gtest/gtest.h>

#include <stdexcept>
#include <string_view>
#include <vector>

namespace canopy::cache {
namespace {

constexpr std::size_t row_vocab = 4;
constexpr std::size_t row_bytes = row_vocab * 4; // float32 rows

row_ptr make_row(float fill) {
  const std::vector<float> values(row_vocab, fill);
  return logprob_row::encode(values.data(), row_vocab, row_dtype::float32);
}

trie_config config_with(std::size_t rows, std::size_t kv_bytes = 1000) {
  trie_config c;
  c.logprob_budget_bytes = rows * row_bytes;
  c.kv_budget_bytes = kv_bytes;
  return c;
}

node_id insert(token_trie& t, std::string_view partition, const token_seq& s) {
  return t.insert(partition, s.data(), s.size());
}

match_result match(token_trie& t, std::string_view partition, const token_seq& s) {
  return t.match(partition, s.data(), s.size());
}

row_ptr put_row(token_trie& t, std::string_view partition, const token_seq& s,
                float fill) {
  row_ptr row = make_row(fill);
  EXPECT_TRUE(t.attach_logprobs(insert(t, partition, s), row));
  return row;
}

TEST(token_trie_partitions, equal_tokens_in_two_partitions_share_no_row_nor_kv) {
  token_trie t(config_with(8));
  const node_id shared = insert(t, "", {1, 2});
  const node_id in_a = insert(t, "a", {1, 2});
  EXPECT_NE(shared, in_a);
  EXPECT_EQ(match(t, "", {1, 2}).node, shared);
  EXPECT_EQ(t.match(token_seq{1, 2}.data(), 2).node, shared) << "no name: the shared one";

  const row_ptr row_a = put_row(t, "a", {1, 2}, -1.0f);
  EXPECT_EQ(match(t, "a", {1, 2}).logprobs, row_a);
  EXPECT_EQ(match(t, "", {1, 2}).logprobs, nullptr);
  EXPECT_EQ(match(t, "b", {1, 2}).logprobs, nullptr);

  for (const node_id n : t.path(shared))
    ASSERT_TRUE(t.attach_kv(n, 0, 100 + n, 10));
  const match_result a = match(t, "a", {1, 2, 3});
  EXPECT_EQ(a.length, 2u);
  EXPECT_EQ(a.kv[0].length, 0u) << "the shared partition's KV showed in partition a";
  EXPECT_EQ(match(t, "", {1, 2, 3}).kv[0].length, 2u);
  t.check_invariants();
}

TEST(token_trie_partitions,
     a_partition_with_no_nodes_matches_nothing_and_cannot_be_extended) {
  token_trie t(config_with(8));
  insert(t, "a", {1});
  const match_result m = match(t, "b", {1});
  EXPECT_EQ(m.node, no_node);
  EXPECT_EQ(m.length, 0u);
  EXPECT_EQ(m.logprobs, nullptr);
  const token_seq s{1};
  EXPECT_THROW(t.extend(m.node, s.data(), s.size()), std::out_of_range);
  EXPECT_EQ(t.stats().partitions, 1u);
  t.check_invariants();
}

TEST(token_trie_partitions, depths_count_tokens_from_the_partitions_root) {
  token_trie t(config_with(8));
  const node_id leaf = insert(t, "tenant 1", {5, 6, 7});
  const std::vector<node_id> path = t.path(leaf);
  ASSERT_EQ(path.size(), 3u);
  EXPECT_EQ(t.depth(path[0]), 1u);
  EXPECT_EQ(t.depth(leaf), 3u);
  EXPECT_EQ(t.partition(leaf), "tenant 1");
  EXPECT_EQ(t.partition(insert(t, "", {5})), "");

  EXPECT_EQ(t.ancestor(leaf, 2), path[1]);
  EXPECT_EQ(t.ancestor(leaf, 3), leaf);
  EXPECT_THROW(t.ancestor(path[0], 2), std::out_of_range);
  const node_id root = t.ancestor(leaf, 0);
  EXPECT_EQ(root, t.parent(path[0]));
  EXPECT_NE(root, root_node);
  EXPECT_EQ(t.depth(root), 0u);
  EXPECT_EQ(t.parent(root), root_node);
  EXPECT_THROW(t.attach_logprobs(root, make_row(-1.0f)), std::invalid_argument);
  EXPECT_THROW(t.attach_kv(root, 0, 1, 10), std::invalid_argument);

  // The first token's KV needs no KV above it, as at the shared root.
  EXPECT_TRUE(t.attach_kv(path[0], 0, 1, 10));
  EXPECT_FALSE(t.attach_kv(path[2], 0, 3, 10)) << "KV without its prefix's KV";
  EXPECT_TRUE(t.attach_kv(path[1], 0, 2, 10));
  const match_result m = match(t, "tenant 1", {5, 6, 7, 8});
  EXPECT_EQ(m.kv[0].length, 2u);
  EXPECT_EQ(m.kv[0].handle, 2u);
  t.check_invariants();
}

TEST(token_trie_partitions, a_partition_goes_with_its_last_node) {
  token_trie t(config_with(8));
  const node_id leaf = insert(t, "a", {1, 2});
  t.lock(leaf);
  EXPECT_EQ(t.stats().partitions, 1u);
  t.unlock(leaf); // holds nothing: pruned up to and including the partition's root
  EXPECT_EQ(t.stats().partitions, 0u);
  EXPECT_EQ(t.stats().nodes, 1u);
  EXPECT_EQ(match(t, "a", {1}).node, no_node);
  t.check_invariants();
}

TEST(token_trie_partitions, budgets_and_eviction_span_every_partition) {
  token_trie t(config_with(2));
  put_row(t, "a", {1}, -1.0f);
  put_row(t, "b", {1}, -2.0f);
  const node_id locked = insert(t, "b", {1});
  t.lock(locked);
  put_row(t, "", {1}, -3.0f); // one over: the least recently used unlocked row goes
  EXPECT_EQ(match(t, "a", {1}).logprobs, nullptr);
  EXPECT_NE(match(t, "b", {1}).logprobs, nullptr);
  EXPECT_NE(match(t, "", {1}).logprobs, nullptr);
  EXPECT_EQ(t.stats().logprob_entries, 2u);
  EXPECT_EQ(t.stats().partitions, 1u) << "partition a left with its only row";
  t.unlock(locked);
  t.check_invariants();
}

TEST(token_trie_partitions, clear_takes_only_the_partitions_named_by_the_prefix) {
  token_trie t(config_with(8));
  for (std::string_view name : {"", "1\n", "1\nsalt", "12\n"}) {
    put_row(t, name, {1, 2}, -1.0f);
    for (const node_id n : t.path(insert(t, name, {1, 2})))
      ASSERT_TRUE(t.attach_kv(n, 0, t.stats().kv_entries[0] + 1, 10));
  }
  const node_id kept = insert(t, "1\n", {1, 2});
  t.lock(kept);

  t.clear_kv("1\nsalt");
  EXPECT_EQ(match(t, "1\nsalt", {1, 2, 3}).kv[0].length, 0u);
  EXPECT_EQ(match(t, "1\n", {1, 2, 3}).kv[0].length, 2u);
  EXPECT_NE(match(t, "1\nsalt", {1, 2}).logprobs, nullptr) << "clear_kv keeps rows";

  t.clear("1\n");
  EXPECT_EQ(match(t, "1\nsalt", {1, 2}).node, no_node)
      << "emptied: the partition is gone";
  EXPECT_NE(match(t, "1\n", {1, 2}).logprobs, nullptr) << "locked: kept";
  EXPECT_NE(match(t, "12\n", {1, 2}).logprobs, nullptr);
  EXPECT_NE(match(t, "", {1, 2}).logprobs, nullptr);
  EXPECT_EQ(match(t, "", {1, 2, 3}).kv[0].length, 2u);
  t.unlock(kept);

  t.clear();
  EXPECT_EQ(t.stats().logprob_entries, 0u);
  EXPECT_EQ(t.stats().partitions, 0u);
  EXPECT_EQ(t.stats().nodes, 1u);
  t.check_invariants();
}

} // namespace
} // namespace canopy::cache
