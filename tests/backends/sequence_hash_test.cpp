#include <canopy/backends/sequence_hash.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using canopy::backends::sequence_hash;
using canopy::backends::sequence_hash_start;
using canopy::backends::sequence_hash_step;
using canopy::cache::token_seq;

constexpr std::uint64_t seed = 0x243F6A8885A308D3ULL;

std::uint64_t hash_of(const token_seq& tokens, std::uint64_t s = seed) {
  return sequence_hash(s, tokens.data(), tokens.size());
}

TEST(sequence_hash, separates_the_genlm_mock_collision) {
  // genlm-backend's mock seeds with sum((i+1)*t): [2] and [0, 1] both give 2.
  EXPECT_NE(hash_of({2}), hash_of({0, 1}));
}

TEST(sequence_hash, token_zero_and_length_count) {
  EXPECT_NE(hash_of({}), hash_of({0}));
  EXPECT_NE(hash_of({0}), hash_of({0, 0}));
  EXPECT_NE(hash_of({0, 0}), hash_of({0, 0, 0}));
}

TEST(sequence_hash, is_order_sensitive) {
  EXPECT_NE(hash_of({1, 2}), hash_of({2, 1}));
  EXPECT_NE(hash_of({1, 2, 3}), hash_of({3, 2, 1}));
  EXPECT_NE(hash_of({1, 2, 3}), hash_of({1, 3, 2}));
  EXPECT_NE(hash_of({5, 5, 7}), hash_of({5, 7, 5}));
}

TEST(sequence_hash, is_a_pure_function_of_seed_and_tokens) {
  EXPECT_EQ(hash_of({4, 8, 15, 16, 23, 42}), hash_of({4, 8, 15, 16, 23, 42}));
  EXPECT_EQ(hash_of({}), sequence_hash_start(seed));
  EXPECT_NE(hash_of({4, 8, 15}, 1), hash_of({4, 8, 15}, 2));
  EXPECT_NE(sequence_hash_start(0), sequence_hash_start(1));
}

TEST(sequence_hash, incremental_equals_one_shot) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> token(0, 50256);
  for (int trial = 0; trial < 100; ++trial) {
    token_seq tokens(1 + trial % 40);
    for (auto& t : tokens)
      t = token(rng);
    std::uint64_t state = sequence_hash_start(seed);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      state = sequence_hash_step(state, tokens[i]);
      // Every prefix's incremental state is that prefix's one-shot hash.
      ASSERT_EQ(state, sequence_hash(seed, tokens.data(), i + 1)) << "trial " << trial;
    }
  }
}

TEST(sequence_hash, no_collisions_among_short_sequences) {
  // Every sequence of length <= 3 over a 64-token alphabet: 1 + 64 + 64^2 + 64^3.
  constexpr int alphabet = 64;
  std::vector<std::uint64_t> hashes;
  hashes.reserve(1 + alphabet + alphabet * alphabet + alphabet * alphabet * alphabet);
  const std::uint64_t empty = sequence_hash_start(seed);
  hashes.push_back(empty);
  for (int a = 0; a < alphabet; ++a) {
    const std::uint64_t ha = sequence_hash_step(empty, a);
    hashes.push_back(ha);
    for (int b = 0; b < alphabet; ++b) {
      const std::uint64_t hb = sequence_hash_step(ha, b);
      hashes.push_back(hb);
      for (int c = 0; c < alphabet; ++c)
        hashes.push_back(sequence_hash_step(hb, c));
    }
  }
  std::sort(hashes.begin(), hashes.end());
  EXPECT_EQ(std::adjacent_find(hashes.begin(), hashes.end()), hashes.end());
  EXPECT_EQ(hashes.size(), 266305u);
}

} // namespace
