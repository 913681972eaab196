// The embedding API on the real scheduler: every method's answer equals the mock's
// reference row, errors carry a code and a message, and the cache and KV paths
// compute exactly the tokens they must.

#include "reference.hpp"
#include "thrown_code.hpp"

#include <canopy/engine.hpp>

#include <gtest/gtest.h>

#include <chrono>

using canopy::engine;
using canopy::engine_config;
using canopy::errc;
using canopy::token_seq;
using canopy::testing::equals_reference;

namespace {

engine_config small_config() {
  engine_config config;
  config.backend = "mock";
  config.vocab_size = 96;
  config.context_length = 64;
  config.scheduler_threads = 2;
  return config;
}

using canopy::testing::code_of_call;

TEST(engine_api, sync_async_callback_and_uncached_paths_agree_with_the_reference) {
  auto config = small_config();
  engine lm{config};
  token_seq s{1, 17, 42, 5};
  EXPECT_TRUE(equals_reference(lm.next_token_logprobs_uncached(s), config, s));
  EXPECT_TRUE(equals_reference(lm.next_token_logprobs_sync(s), config, s));
  EXPECT_TRUE(equals_reference(lm.next_token_logprobs(s).get(), config, s));
  std::promise<canopy::logprobs_result> got;
  lm.next_token_logprobs(s,
                         [&](canopy::logprobs_result r) { got.set_value(std::move(r)); });
  auto result = got.get_future().get();
  ASSERT_TRUE(std::holds_alternative<at::Tensor>(result));
  EXPECT_TRUE(equals_reference(std::get<at::Tensor>(result), config, s));
  EXPECT_EQ(lm.vocab_size(), 96);
}

TEST(engine_api, batch_next_token_logprobs_stacks_one_row_per_sequence) {
  auto config = small_config();
  engine lm{config};
  std::vector<token_seq> batch{{3}, {3, 4}, {9, 9, 9}, {3}};
  auto rows = lm.batch_next_token_logprobs(batch);
  ASSERT_EQ(rows.sizes(), (std::vector<std::int64_t>{4, 96}));
  for (std::size_t b = 0; b < batch.size(); ++b)
    EXPECT_TRUE(equals_reference(rows[b], config, batch[b])) << "row " << b;
}

TEST(engine_api, bad_sequences_get_a_clear_error_and_the_engine_keeps_serving) {
  auto config = small_config();
  engine lm{config};
  EXPECT_EQ(code_of_call([&] { lm.next_token_logprobs_sync({}); }), errc::empty_sequence);
  EXPECT_EQ(code_of_call([&] {
              lm.next_token_logprobs_sync({1, 96});
            }),
            errc::token_out_of_range);
  EXPECT_EQ(code_of_call([&] { lm.next_token_logprobs_sync({-3}); }),
            errc::token_out_of_range);
  EXPECT_EQ(code_of_call([&] { lm.next_token_logprobs_sync(token_seq(65, 1)); }),
            errc::sequence_too_long);
  EXPECT_EQ(code_of_call([&] { lm.next_token_logprobs_uncached({}); }),
            errc::empty_sequence);
  try {
    lm.next_token_logprobs_sync({5, 200});
    FAIL() << "an out-of-range id was accepted";
  } catch (const canopy::error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 200 at position 1"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(equals_reference(lm.next_token_logprobs_sync({5}), config, {5}));
  auto stats = lm.stats();
  EXPECT_EQ(stats.failed, 6u);
  EXPECT_EQ(stats.queries, stats.answered + stats.failed);
}

TEST(engine_api, hits_share_the_cached_row_without_copying) {
  auto config = small_config();
  engine lm{config};
  auto first = lm.next_token_logprobs_sync({7, 8});
  auto second = lm.next_token_logprobs_sync({7, 8});
  EXPECT_EQ(first.data_ptr(), second.data_ptr());
  EXPECT_EQ(lm.stats().cache_hits, 1u);
}

TEST(engine_api, extending_token_by_token_computes_each_token_once) {
  auto config = small_config();
  engine lm{config};
  token_seq s;
  for (int t = 0; t < 20; ++t) {
    s.push_back((t * 13) % 96);
    ASSERT_TRUE(equals_reference(lm.next_token_logprobs_sync(s), config, s));
  }
  auto stats = lm.stats();
  EXPECT_EQ(stats.tokens_computed, 20u);
  EXPECT_EQ(stats.tokens_requested, 20u * 21u / 2u);
}

TEST(engine_api, scoring_every_prefix_after_the_whole_text_is_all_hits) {
  auto config = small_config();
  engine lm{config};
  token_seq text{4, 8, 15, 16, 23, 42};
  lm.next_token_logprobs_sync(text);
  for (std::size_t n = 1; n <= text.size(); ++n) {
    token_seq prefix(text.begin(), text.begin() + n);
    EXPECT_TRUE(equals_reference(lm.next_token_logprobs_sync(prefix), config, prefix));
  }
  EXPECT_EQ(lm.stats().tokens_computed, text.size());
  EXPECT_EQ(lm.stats().cache_hits, text.size());
}

TEST(engine_api, cache_kv_makes_an_extension_compute_one_token) {
  auto config = small_config();
  engine lm{config};
  token_seq prompt{10, 11, 12, 13, 14};
  lm.cache_kv(prompt);
  EXPECT_EQ(lm.stats().tokens_computed, prompt.size());
  token_seq longer = prompt;
  longer.push_back(15);
  EXPECT_TRUE(equals_reference(lm.next_token_logprobs_sync(longer), config, longer));
  EXPECT_EQ(lm.stats().tokens_computed, prompt.size() + 1);
}

TEST(engine_api, clear_kv_cache_keeps_rows_and_clear_cache_drops_them) {
  auto config = small_config();
  engine lm{config};
  token_seq s{1, 2, 3};
  lm.next_token_logprobs_sync(s);
  lm.clear_kv_cache();
  EXPECT_EQ(lm.stats().kv_bytes.at(0), 0u);
  EXPECT_TRUE(equals_reference(lm.next_token_logprobs_sync(s), config, s));
  EXPECT_EQ(lm.stats().tokens_computed, 3u); // a hit
  token_seq longer{1, 2, 3, 4};
  EXPECT_TRUE(equals_reference(lm.next_token_logprobs_sync(longer), config, longer));
  EXPECT_EQ(lm.stats().tokens_computed, 7u); // the prefix KV was gone
  lm.clear_cache();
  EXPECT_EQ(lm.stats().logprob_bytes, 0u);
  EXPECT_TRUE(equals_reference(lm.next_token_logprobs_sync(s), config, s));
  EXPECT_EQ(lm.stats().tokens_computed, 10u);
}

TEST(engine_api, with_the_cache_off_every_query_computes_its_whole_sequence) {
  auto config = small_config();
  config.cache_enabled = false;
  engine lm{config};
  token_seq s{2, 7, 1, 8};
  EXPECT_TRUE(equals_reference(lm.next_token_logprobs_sync(s), config, s));
  EXPECT_TRUE(equals_reference(lm.next_token_logprobs_sync(s), config, s));
  token_seq longer{2, 7, 1, 8, 2};
  EXPECT_TRUE(equals_reference(lm.next_token_logprobs_sync(longer), config, longer));
  auto stats = lm.stats();
  EXPECT_EQ(stats.cache_hits, 0u);
  EXPECT_EQ(stats.tokens_computed, 4u + 4u + 5u);
  EXPECT_EQ(stats.logprob_bytes, 0u);
}

TEST(engine_api, greedy_sampling_follows_the_argmax_and_stops_at_eos) {
  auto config = small_config();
  engine lm{config};
  token_seq prompt{1, 2};
  token_seq expected;
  token_seq context = prompt;
  for (int i = 0; i < 6; ++i) {
    auto row = canopy::testing::reference_row(config, context);
    auto best =
        static_cast<std::int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    expected.push_back(best);
    context.push_back(best);
  }
  EXPECT_EQ(lm.sample(prompt, 6, {}, 0.0), expected);
  EXPECT_EQ(lm.sample(prompt, 6, {expected[2]}, 0.0),
            token_seq(expected.begin(), expected.begin() + 3));
}

TEST(engine_api, batch_sample_gives_each_prompt_its_own_reproducible_stream) {
  auto config = small_config();
  engine lm{config};
  std::vector<token_seq> prompts(4, token_seq{5, 6});
  auto first = lm.batch_sample(prompts, 12, {}, 1.0, 1234);
  auto again = lm.batch_sample(prompts, 12, {}, 1.0, 1234);
  EXPECT_EQ(first, again);
  // Same prompt, different index: different streams, so (with overwhelming
  // probability over 12 draws) different continuations.
  EXPECT_NE(first[0], first[1]);
  EXPECT_EQ(lm.sample(prompts[0], 12, {}, 1.0, 1234), first[0]);
}

TEST(engine_api, float16_rows_stay_within_their_documented_error) {
  auto config = small_config();
  config.logprob_dtype = "float16";
  engine lm{config};
  token_seq s{3, 1, 4, 1, 5};
  auto row = lm.next_token_logprobs_sync(s);
  auto reference = canopy::testing::reference_row(config, s);
  float worst = 0;
  for (std::size_t v = 0; v < reference.size(); ++v)
    worst = std::max(worst, std::abs(row[v].item<float>() - reference[v]));
  EXPECT_GT(worst, 0.0f);
  EXPECT_LE(worst, 0.0078125f); // 2^-7: half a float16 step for |x| < 32
  EXPECT_EQ(lm.stats().logprob_bytes, 5u * 96u * 2u);
}

} // namespace
