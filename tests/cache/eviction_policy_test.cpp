#include <canopy/cache/eviction_policy.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

namespace canopy::cache {
namespace {

node_stats stats(std::uint64_t last_access, std::uint64_t hits, std::uint64_t created,
                 std::int32_t priority = 0) {
  return node_stats{last_access, hits, created, priority};
}

// Indices of `nodes` in the order the policy evicts them.
std::vector<std::size_t> eviction_order(eviction_policy policy,
                                        const std::vector<node_stats>& nodes) {
  std::vector<std::size_t> order(nodes.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return make_eviction_key(policy, nodes[a]) < make_eviction_key(policy, nodes[b]);
  });
  return order;
}

using order = std::vector<std::size_t>;

TEST(eviction_policy, parses_its_own_names_only) {
  for (eviction_policy p : {eviction_policy::lru, eviction_policy::lfu,
                            eviction_policy::fifo, eviction_policy::priority})
    EXPECT_EQ(parse_eviction_policy(to_string(p)), p);
  EXPECT_EQ(to_string(eviction_policy::lfu), "lfu");
  EXPECT_FALSE(parse_eviction_policy("LRU"));
  EXPECT_FALSE(parse_eviction_policy("random"));
  EXPECT_FALSE(parse_eviction_policy(""));
}

TEST(eviction_policy, lru_evicts_oldest_access_first) {
  const std::vector<node_stats> nodes = {
      stats(5, 100, 1), // many hits do not save it
      stats(3, 0, 4),   // oldest access
      stats(9, 0, 2),
  };
  EXPECT_EQ(eviction_order(eviction_policy::lru, nodes), (order{1, 0, 2}));
}

TEST(eviction_policy, lfu_evicts_fewest_hits_first_and_breaks_ties_by_access) {
  const std::vector<node_stats> nodes = {
      stats(1, 7, 1),
      stats(8, 2, 2), // two hits, recent
      stats(4, 2, 3), // two hits, older: goes before node 1
      stats(2, 9, 4),
  };
  EXPECT_EQ(eviction_order(eviction_policy::lfu, nodes), (order{2, 1, 0, 3}));
}

TEST(eviction_policy, fifo_evicts_in_creation_order) {
  const std::vector<node_stats> nodes = {
      stats(1, 0, 30),
      stats(50, 90, 10), // created first, however popular
      stats(2, 1, 20),
  };
  EXPECT_EQ(eviction_order(eviction_policy::fifo, nodes), (order{1, 2, 0}));
}

TEST(eviction_policy, priority_evicts_lowest_priority_first_then_lru) {
  const std::vector<node_stats> nodes = {
      stats(1, 0, 1, 5),
      stats(9, 0, 2, -3), // negative priority, evicted first despite recent access
      stats(7, 0, 3, 0), stats(2, 0, 4, 0), // same priority as node 2 but older
  };
  EXPECT_EQ(eviction_order(eviction_policy::priority, nodes), (order{1, 3, 2, 0}));
}

TEST(eviction_policy, keys_never_tie_between_nodes) {
  // Identical statistics except the unique creation time.
  const node_stats a = stats(4, 4, 1, 4), b = stats(4, 4, 2, 4);
  for (eviction_policy p : {eviction_policy::lru, eviction_policy::lfu,
                            eviction_policy::fifo, eviction_policy::priority}) {
    EXPECT_LT(make_eviction_key(p, a), make_eviction_key(p, b)) << to_string(p);
  }
}

} // namespace
} // namespace canopy::cache
