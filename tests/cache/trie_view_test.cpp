// token_trie::view, the trie as people read it: the prefix's node and those below it
// within the limits, siblings most hit first, what each holds (row bytes, KV per worker
// and tier, locks, children); only the asked partition; nothing for an absent prefix;
// the limits cut the deepest and least hit first, saying so; and viewing changes
// neither what the trie holds nor its statistics.

#include <canopy/cache/token_trie.hpp>

#include <gtest/gtest.h>

#include <string_view>
#include <vector>

namespace canopy::cache {
namespace {

constexpr std::size_t row_vocab = 4;

row_ptr make_row() {
  const std::vector<float> values(row_vocab, -1.0f);
  return logprob_row::encode(values.data(), row_vocab, row_dtype::float32);
}

trie_config two_workers() {
  trie_config c;
  c.workers = 2;
  return c;
}

node_id insert(token_trie& t, std::string_view partition, const token_seq& s) {
  return t.insert(partition, s.data(), s.size());
}

trie_view view_of(token_trie& t, std::string_view partition, const token_seq& prefix,
                  trie_view_limits limits = {}) {
  return t.view(partition, prefix.data(), prefix.size(), limits);
}

void hit(token_trie& t, std::string_view partition, const token_seq& s, int times) {
  for (int i = 0; i < times; ++i)
    t.match(partition, s.data(), s.size());
}

TEST(trie_view, shows_the_prefix_and_below_it_siblings_most_hit_first) {
  token_trie t(two_workers());
  const auto a = insert(t, "", {5, 1});
  insert(t, "", {5, 2, 8});
  insert(t, "", {5, 3});
  insert(t, "", {6});
  ASSERT_TRUE(t.attach_logprobs(a, make_row()));
  ASSERT_TRUE(t.attach_kv(t.parent(a), 1, 11, 100));
  ASSERT_TRUE(t.attach_kv(a, 1, 12, 100));
  t.lock(a);
  hit(t, "", {5, 2}, 3);
  hit(t, "", {5, 1}, 1);

  const auto v = view_of(t, "", {5});
  ASSERT_EQ(v.nodes.size(), 5u) << "5, its children 2, 1, 3 and 2's child 8";
  EXPECT_FALSE(v.truncated);
  EXPECT_EQ(v.nodes[0].token, 5);
  EXPECT_EQ(v.nodes[0].depth, 1u);
  EXPECT_EQ(v.nodes[0].parent, -1);
  EXPECT_EQ(v.nodes[0].children, 3u);
  ASSERT_EQ(v.nodes[0].kv.size(), 1u);
  EXPECT_EQ(v.nodes[0].kv[0].worker, 1u);
  EXPECT_FALSE(v.nodes[0].kv[0].on_host);
  EXPECT_EQ(v.nodes[0].kv[0].bytes, 100u);
  std::vector<token_id> order;
  for (std::size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(v.nodes[i].parent, 0);
    EXPECT_EQ(v.nodes[i].depth, 2u);
    order.push_back(v.nodes[i].token);
  }
  EXPECT_EQ(order, (std::vector<token_id>{2, 1, 3})) << "hits 3, 1, 0";
  EXPECT_EQ(v.nodes[1].hits - v.nodes[3].hits, 3u) << "2 was matched 3 times, 3 never";
  const auto& one = v.nodes[2];
  EXPECT_EQ(one.row_bytes, row_vocab * 4);
  EXPECT_EQ(one.locks, 1u);
  EXPECT_EQ(one.kv.size(), 1u);
  EXPECT_EQ(v.nodes[3].row_bytes, 0u);
  EXPECT_TRUE(v.nodes[3].kv.empty());
  EXPECT_EQ(v.nodes[4].token, 8);
  EXPECT_EQ(v.nodes[4].parent, 1) << "below 2, which comes first";
  t.unlock(a);

  const auto root = view_of(t, "", {}, {1, 16, 64});
  ASSERT_EQ(root.nodes.size(), 3u) << "the root, 5 and 6";
  EXPECT_EQ(root.nodes[0].depth, 0u);
  EXPECT_EQ(root.nodes[1].token, 5);
}

TEST(trie_view, sees_only_its_partition_and_nothing_for_an_absent_prefix) {
  token_trie t(two_workers());
  insert(t, "", {5, 1});
  insert(t, "tenant", {5, 2});
  const auto shared = view_of(t, "", {5});
  ASSERT_EQ(shared.nodes.size(), 2u);
  EXPECT_EQ(shared.nodes[1].token, 1);
  const auto tenant = view_of(t, "tenant", {});
  ASSERT_EQ(tenant.nodes.size(), 3u);
  EXPECT_EQ(tenant.nodes[2].token, 2);
  EXPECT_TRUE(view_of(t, "", {7}).nodes.empty());
  EXPECT_TRUE(view_of(t, "nobody", {}).nodes.empty());
}

TEST(trie_view, limits_cut_the_least_hit_and_deepest_and_say_so) {
  token_trie t(two_workers());
  for (token_id k = 0; k < 10; ++k) {
    insert(t, "", {1, k, 7});
    hit(t, "", {1, k}, k);
  }
  const auto few = view_of(t, "", {1}, {1, 3, 100});
  ASSERT_EQ(few.nodes.size(), 4u);
  EXPECT_TRUE(few.truncated);
  EXPECT_EQ(few.nodes[1].token, 9);
  EXPECT_EQ(few.nodes[3].token, 7);
  const auto small = view_of(t, "", {1}, {2, 16, 6});
  ASSERT_EQ(small.nodes.size(), 6u);
  EXPECT_TRUE(small.truncated);
  for (std::size_t i = 1; i < small.nodes.size(); ++i)
    EXPECT_EQ(small.nodes[i].depth, 2u) << "a whole level before the next";
  EXPECT_FALSE(view_of(t, "", {1}, {2, 16, 21}).truncated);
}

TEST(trie_view, viewing_changes_nothing) {
  token_trie t(two_workers());
  const auto a = insert(t, "", {3, 4});
  ASSERT_TRUE(t.attach_logprobs(a, make_row()));
  hit(t, "", {3, 4}, 2);
  const auto before = view_of(t, "", {});
  const auto nodes = t.stats().nodes;
  const auto again = view_of(t, "", {});
  ASSERT_EQ(again.nodes.size(), before.nodes.size());
  for (std::size_t i = 0; i < again.nodes.size(); ++i)
    EXPECT_EQ(again.nodes[i].hits, before.nodes[i].hits);
  EXPECT_EQ(t.stats().nodes, nodes);
  t.check_invariants();
}

} // namespace
} // namespace canopy::cache
