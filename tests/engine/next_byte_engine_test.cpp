// engine::next_byte_logprobs: the distribution from the sequence's row and the masses the
// cache keeps beside it. The answers must be those of byte_masses over the row the engine
// serves (bit for bit: the same floats through the same code), a repeated call must cost
// neither a pass nor a new set of masses, and eviction must drop the masses with their
// row without changing any answer. The mock over Llama 3's tokenizer (128k ids) keeps
// it fast; model_fidelity_tests hold the same answers against the float64 oracle.

#include "shared_fixtures.hpp"

#include <canopy/cache/logprob_row.hpp>
#include <canopy/engine.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>

namespace {

using canopy::engine;
using canopy::engine_config;
using canopy::errc;
using canopy::token_seq;
using canopy::backends::byte_masses;
using canopy::backends::byte_order;
using canopy::backends::byte_reduce;
using canopy::backends::next_byte_distribution;

engine_config mock_with(const std::filesystem::path& tokenizer) {
  engine_config c;
  c.backend = "mock";
  c.tokenizer = tokenizer.string();
  c.scheduler_threads = 2;
  return c;
}

/// What byte_masses answers over the row the engine serves after `tokens`.
next_byte_distribution expected(engine& lm, const token_seq& tokens,
                                const std::string& prefix, byte_reduce reduce) {
  const auto order =
      std::make_shared<const byte_order>(lm.byte_vocab(), lm.eos_token_ids());
  const auto row = lm.next_token_logprobs_sync(tokens).contiguous();
  const auto stored = canopy::cache::logprob_row::encode(
      row.data_ptr<float>(), static_cast<std::size_t>(row.numel()),
      canopy::cache::row_dtype::float32);
  return byte_masses(order, stored).next_byte(prefix, reduce);
}

void expect_identical(const next_byte_distribution& got,
                      const next_byte_distribution& want) {
  EXPECT_EQ(got.logprobs, want.logprobs);
  EXPECT_EQ(got.end_of_token, want.end_of_token);
  EXPECT_EQ(got.eos, want.eos);
  EXPECT_EQ(got.log_mass, want.log_mass);
}

canopy::errc code_of(std::future<next_byte_distribution> f) {
  try {
    f.get();
  } catch (const canopy::error& e) {
    return e.code();
  }
  return errc::none;
}

TEST(engine_next_byte, is_refused_without_a_tokenizer_and_the_engine_serves_on) {
  engine_config c;
  c.backend = "mock";
  c.scheduler_threads = 2;
  engine lm{c};
  EXPECT_EQ(code_of(lm.next_byte_logprobs({1, 2})), errc::no_tokenizer);
  EXPECT_EQ(lm.next_token_logprobs_sync({1, 2}).numel(), 512);
  EXPECT_EQ(lm.stats().next_byte_queries, 1u);
  EXPECT_EQ(lm.stats().failed, 1u);
}

TEST(engine_next_byte, repeated_calls_cost_neither_a_pass_nor_new_masses) {
  CANOPY_SHARED_PATH_OR_SKIP(tokenizer, "models/tokenizers/llama3/tokenizer.json");
  engine lm{mock_with(tokenizer)};
  ASSERT_FALSE(lm.eos_token_ids().empty());
  const token_seq tokens{128000, 791, 4062};
  const auto first = lm.next_byte_logprobs(tokens, "", byte_reduce::sum).get();
  ASSERT_TRUE(first.eos.has_value());
  EXPECT_EQ(lm.stats().batches, 1u);
  EXPECT_EQ(lm.stats().next_byte_masses_made, 1u);
  // Other prefixes and the other reduction over the same row: hits, answered from the
  // masses kept beside it.
  const char* prefixes[] = {"", " ", " t", " th", "\xe2\x80", "zzzz"};
  for (const auto* prefix : prefixes)
    for (const auto reduce : {byte_reduce::sum, byte_reduce::max})
      expect_identical(lm.next_byte_logprobs(tokens, prefix, reduce).get(),
                       expected(lm, tokens, prefix, reduce));
  const auto s = lm.stats();
  EXPECT_EQ(s.batches, 1u);
  EXPECT_EQ(s.next_byte_masses_made, 1u);
  EXPECT_EQ(s.next_byte_masses_kept, 1u);
  EXPECT_EQ(s.next_byte_queries, 13u);
  EXPECT_EQ(s.cache_hits, 12u + 12u); // the calls, and expected()'s own row fetches
  // The masses are charged with the rows (one per position), and take a fraction of one.
  const auto row_bytes = static_cast<std::uint64_t>(lm.vocab_size()) * 4;
  const auto masses_bytes = s.logprob_bytes - s.logprob_entries * row_bytes;
  EXPECT_GT(masses_bytes, 0u);
  EXPECT_LT(masses_bytes, row_bytes / 2);
}

TEST(engine_next_byte, eviction_drops_the_masses_and_changes_no_answer) {
  CANOPY_SHARED_PATH_OR_SKIP(tokenizer, "models/tokenizers/llama3/tokenizer.json");
  auto c = mock_with(tokenizer);
  // Two rows with their masses, and not three (one-token sequences: one row each).
  c.logprob_budget_bytes = 2 * (128256 * 4 + 128256 / 8);
  engine lm{c};
  const token_seq a{1};
  const auto before = lm.next_byte_logprobs(a, " ", byte_reduce::sum).get();
  for (std::int32_t t = 10; t < 14; ++t)
    lm.next_byte_logprobs({t}, "", byte_reduce::max).get();
  auto s = lm.stats();
  EXPECT_GT(s.logprob_evictions, 0u);
  EXPECT_LE(s.logprob_bytes, c.logprob_budget_bytes);
  EXPECT_LE(s.next_byte_masses_kept, 2u);
  const auto after = lm.next_byte_logprobs(a, " ", byte_reduce::sum).get();
  expect_identical(after, before);
  s = lm.stats();
  EXPECT_EQ(s.next_byte_masses_made, 6u); // a's row was computed again, and its masses
  EXPECT_LE(s.logprob_bytes, c.logprob_budget_bytes);
}

TEST(engine_next_byte, partitions_keep_their_own_masses) {
  CANOPY_SHARED_PATH_OR_SKIP(tokenizer, "models/tokenizers/llama3/tokenizer.json");
  engine lm{mock_with(tokenizer)};
  canopy::query_options tenant;
  tenant.cache_partition = "tenant";
  const token_seq tokens{5, 6};
  const auto shared = lm.next_byte_logprobs(tokens, "a").get();
  const auto own = lm.next_byte_logprobs(tokens, "a", byte_reduce::sum, tenant).get();
  expect_identical(own, shared); // the mock's rows depend on the tokens alone
  lm.next_byte_logprobs(tokens, "b", byte_reduce::sum, tenant).get();
  EXPECT_EQ(lm.stats().next_byte_masses_made, 2u);
  EXPECT_EQ(lm.stats().next_byte_masses_kept, 2u);
}

TEST(engine_next_byte, callbacks_get_answers_and_errors) {
  CANOPY_SHARED_PATH_OR_SKIP(tokenizer, "models/tokenizers/llama3/tokenizer.json");
  engine lm{mock_with(tokenizer)};
  auto ask = [&](token_seq tokens, std::string prefix) {
    std::promise<canopy::next_byte_result> done;
    auto result = done.get_future();
    lm.next_byte_logprobs(std::move(tokens), std::move(prefix), byte_reduce::max,
                          [&done](canopy::next_byte_result r) { done.set_value(r); });
    return result.get();
  };
  const auto good = ask({7}, "x");
  ASSERT_TRUE(std::holds_alternative<next_byte_distribution>(good));
  expect_identical(std::get<next_byte_distribution>(good),
                   expected(lm, {7}, "x", byte_reduce::max));
  const auto empty = ask({}, "");
  ASSERT_TRUE(std::holds_alternative<canopy::error>(empty));
  EXPECT_EQ(std::get<canopy::error>(empty).code(), errc::empty_sequence);
  const auto outside = ask({1, 1 << 30}, "");
  ASSERT_TRUE(std::holds_alternative<canopy::error>(outside));
  EXPECT_EQ(std::get<canopy::error>(outside).code(), errc::token_out_of_range);
}

TEST(engine_next_byte, without_a_cache_every_call_makes_its_masses) {
  CANOPY_SHARED_PATH_OR_SKIP(tokenizer, "models/tokenizers/llama3/tokenizer.json");
  auto c = mock_with(tokenizer);
  c.cache_enabled = false;
  engine lm{c};
  const auto first = lm.next_byte_logprobs({3, 4}, "q").get();
  expect_identical(lm.next_byte_logprobs({3, 4}, "q").get(), first);
  EXPECT_EQ(lm.stats().next_byte_masses_made, 2u);
  EXPECT_EQ(lm.stats().next_byte_masses_kept, 0u);
}

} // namespace
