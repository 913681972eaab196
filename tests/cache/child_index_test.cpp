#include <canopy/cache/child_index.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

namespace canopy::cache {
namespace {

std::uint64_t trie_key(std::uint32_t parent, std::uint32_t token) {
  return (std::uint64_t{parent} << 32) | token;
}

std::uint32_t found(const child_index& index, std::uint64_t key) {
  const std::uint32_t* value = index.find(key);
  return value ? *value : 0xdeadbeefu;
}

TEST(child_index, empty_finds_nothing) {
  child_index index;
  EXPECT_EQ(index.find(0), nullptr);
  EXPECT_EQ(index.find(trie_key(1, 2)), nullptr);
  EXPECT_FALSE(index.erase(0));
  EXPECT_EQ(index.size(), 0u);
  EXPECT_EQ(index.capacity(), 0u);
}

TEST(child_index, insert_find_erase) {
  child_index index;
  EXPECT_TRUE(index.insert(0, 7)); // key 0 is an ordinary key
  EXPECT_TRUE(index.insert(trie_key(0, 5), 1));
  EXPECT_TRUE(index.insert(trie_key(5, 0), 2));
  EXPECT_FALSE(index.insert(trie_key(0, 5), 9)); // present: keeps its value
  EXPECT_EQ(index.size(), 3u);
  EXPECT_EQ(found(index, 0), 7u);
  EXPECT_EQ(found(index, trie_key(0, 5)), 1u);
  EXPECT_EQ(found(index, trie_key(5, 0)), 2u);
  EXPECT_EQ(index.find(trie_key(5, 5)), nullptr);

  EXPECT_TRUE(index.erase(trie_key(0, 5)));
  EXPECT_FALSE(index.erase(trie_key(0, 5)));
  EXPECT_EQ(index.find(trie_key(0, 5)), nullptr);
  EXPECT_EQ(found(index, 0), 7u);
  EXPECT_EQ(found(index, trie_key(5, 0)), 2u);
  EXPECT_EQ(index.size(), 2u);
  EXPECT_TRUE(index.insert(trie_key(0, 5), 3));
  EXPECT_EQ(found(index, trie_key(0, 5)), 3u);
}

TEST(child_index, grows_keeping_every_key_and_the_load_factor) {
  child_index index;
  std::uint32_t value = 1;
  for (std::uint32_t parent = 0; parent < 300; ++parent)
    for (std::uint32_t token = 0; token < 300; ++token) {
      ASSERT_TRUE(index.insert(trie_key(parent, token), value++));
      const std::size_t capacity = index.capacity();
      ASSERT_EQ(capacity & (capacity - 1), 0u) << "not a power of two";
      ASSERT_LE(index.size() * 10, capacity * 7) << "load factor over 0.7";
    }
  value = 1;
  for (std::uint32_t parent = 0; parent < 300; ++parent)
    for (std::uint32_t token = 0; token < 300; ++token)
      ASSERT_EQ(found(index, trie_key(parent, token)), value++);
  EXPECT_EQ(index.find(trie_key(300, 0)), nullptr);
  EXPECT_EQ(index.find(trie_key(0, 300)), nullptr);
}

// Interleaved inserts, erases and finds against std::unordered_map, with a full
// comparison after every step. The size swings between empty and the growth threshold
// of small tables, so long probe runs wrap around the table's end and erases shift
// keys across it: any slip in backward-shift deletion strands a key (a later find
// misses it) or resurrects one.
TEST(child_index, randomized_against_unordered_map) {
  for (std::uint32_t seed = 1; seed <= 18; ++seed) {
    std::mt19937_64 rng(seed);
    // Few distinct keys, so that inserts of present keys and erases of absent ones
    // are common; both halves vary, as parent and token do in the trie.
    const std::uint32_t universe = 8u << (seed % 6);
    const auto draw = [&] {
      const auto r = static_cast<std::uint32_t>(rng() % universe);
      return trie_key(r % 7, r / 7);
    };
    child_index index;
    std::unordered_map<std::uint64_t, std::uint32_t> reference;
    bool filling = true;
    for (int step = 0; step < 3000; ++step) {
      if (reference.size() * 10 + 10 > universe * 7)
        filling = false;
      if (reference.empty())
        filling = true;
      const std::uint64_t key = draw();
      const auto it = reference.find(key);
      const int action = static_cast<int>(rng() % 10);
      if (action < (filling ? 7 : 3)) {
        const auto value = static_cast<std::uint32_t>(rng());
        ASSERT_EQ(index.insert(key, value), it == reference.end()) << "seed " << seed;
        reference.emplace(key, value);
      } else if (action < 9) {
        ASSERT_EQ(index.erase(key), it != reference.end()) << "seed " << seed;
        reference.erase(key);
      } else {
        ASSERT_EQ(index.find(key) != nullptr, it != reference.end()) << "seed " << seed;
      }
      ASSERT_EQ(index.size(), reference.size()) << "seed " << seed;
      for (const auto& [k, v] : reference)
        ASSERT_EQ(found(index, k), v) << "seed " << seed << " step " << step;
      for (int probe = 0; probe < 8; ++probe) {
        const std::uint64_t other = draw();
        ASSERT_EQ(index.find(other) != nullptr, reference.count(other) == 1)
            << "seed " << seed << " step " << step;
      }
    }
  }
}

} // namespace
} // namespace canopy::cache
