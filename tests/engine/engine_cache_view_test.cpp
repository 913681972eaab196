// engine::cache_view, the cache as people read it through the embedding API (the real
// request and cache actors, the mock backend): the root and a prefix's node with what
// they hold after queries; each partition and each adapter sees its own entries only;
// an absent prefix has no nodes; a prefix and scope are checked as a query's are.

#include "mock_adapter.hpp"
#include "thrown_code.hpp"

#include <canopy/engine.hpp>

#include <gtest/gtest.h>

#include <string>

namespace {

using canopy::engine;
using canopy::errc;
using canopy::query_options;
using canopy::token_seq;
using canopy::testing::code_of_call;

engine lm_with_mock() {
  canopy::engine_config c;
  c.backend = "mock";
  c.vocab_size = 64;
  c.scheduler_threads = 2;
  return engine{c};
}

TEST(engine_cache_view, shows_what_queries_left_at_the_root_and_below_a_prefix) {
  auto lm = lm_with_mock();
  lm.next_token_logprobs_sync({1, 2, 3});
  lm.next_token_logprobs_sync({1, 2, 4});
  lm.next_token_logprobs_sync({1, 2, 4}); // a hit

  const auto root = lm.cache_view({}, {1, 8, 64});
  ASSERT_EQ(root.nodes.size(), 2u) << "the root and token 1";
  EXPECT_EQ(root.nodes[0].depth, 0u);
  EXPECT_EQ(root.nodes[1].token, 1);
  EXPECT_EQ(root.nodes[1].children, 1u);

  const auto two = lm.cache_view({1, 2}, {1, 8, 64});
  ASSERT_EQ(two.nodes.size(), 3u);
  EXPECT_EQ(two.nodes[0].depth, 2u);
  EXPECT_EQ(two.nodes[1].token, 4) << "the hit one first";
  EXPECT_GT(two.nodes[1].hits, two.nodes[2].hits);
  for (std::size_t i = 1; i < 3; ++i) {
    EXPECT_GT(two.nodes[i].row_bytes, 0u) << "each asked sequence's row is kept";
    ASSERT_EQ(two.nodes[i].kv.size(), 1u) << "and its KV on the one worker";
    EXPECT_FALSE(two.nodes[i].kv[0].on_host);
    EXPECT_EQ(two.nodes[i].locks, 0u) << "nothing waits";
  }
  EXPECT_TRUE(lm.cache_view({9}).nodes.empty());
}

TEST(engine_cache_view, each_partition_and_adapter_sees_its_own) {
  canopy::testing::scratch_dir adapter;
  canopy::testing::write_mock_adapter(adapter, "weights");
  auto lm = lm_with_mock();
  lm.add_adapter("tuned", adapter.path().string());
  query_options tenant, tuned;
  tenant.cache_partition = "tenant";
  tuned.adapter = "tuned";
  lm.next_token_logprobs_sync({5, 6}, tenant);
  lm.next_token_logprobs_sync({7, 8}, tuned);
  lm.next_token_logprobs_sync({9});
  const auto shared = lm.cache_view({});
  ASSERT_EQ(shared.nodes.size(), 2u);
  EXPECT_EQ(shared.nodes[1].token, 9);
  const auto own = lm.cache_view({}, {}, tenant);
  ASSERT_EQ(own.nodes.size(), 3u);
  EXPECT_EQ(own.nodes[1].token, 5);
  const auto adapted = lm.cache_view({7}, {}, tuned);
  ASSERT_EQ(adapted.nodes.size(), 2u);
  EXPECT_EQ(adapted.nodes[1].token, 8);
  EXPECT_TRUE(lm.cache_view({7}).nodes.empty()) << "the base does not see the adapter's";
}

TEST(engine_cache_view, checks_the_prefix_and_scope_as_a_querys) {
  auto lm = lm_with_mock();
  query_options unknown, nul;
  unknown.adapter = "nobody";
  nul.cache_partition = std::string("a\0b", 3);
  EXPECT_EQ(code_of_call([&] { lm.cache_view({}, {}, unknown); }), errc::unknown_adapter);
  EXPECT_EQ(code_of_call([&] { lm.cache_view({}, {}, nul); }), errc::invalid_request);
  EXPECT_EQ(code_of_call([&] { lm.cache_view({64}); }), errc::token_out_of_range);
  EXPECT_EQ(code_of_call([&] { lm.cache_view({}); }), errc::none)
      << "the root needs no token";
}

} // namespace
