// The engine on the real models against the independent float64 oracle: every row
// of every case within its tolerance through every path (uncached; sync; async
// batched together with unrelated queries; after cache_kv of a prefix; extending
// token by token; after the prefix's KV was evicted), and stories260K's 200 greedy
// tokens from BOS exactly.

#include "oracle.hpp"
#include "shared_fixtures.hpp"
#include "test_device.hpp"

#include <canopy/engine.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <random>
#include <string>

namespace {

using canopy::engine;
using canopy::engine_config;
using canopy::token_seq;
using canopy::testing::load_oracle_cases;
using canopy::testing::max_abs_diff;
using canopy::testing::oracle_case;

using canopy::testing::model_fixture;

token_seq prefix(const token_seq& s, std::size_t n) {
  return token_seq(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(n));
}

/// max |row - oracle row i| (the row after tokens[0..i]).
double error(const at::Tensor& row, const oracle_case& c, std::size_t i) {
  EXPECT_EQ(row.scalar_type(), at::kFloat);
  EXPECT_EQ(row.numel(), c.vocab);
  const auto r = row.contiguous();
  return max_abs_diff(r.data_ptr<float>(), c.row(static_cast<std::int64_t>(i)),
                      static_cast<std::size_t>(c.vocab));
}

class model_fidelity : public ::testing::TestWithParam<model_fixture> {
protected:
  engine_config config(std::uint64_t kv_budget = 64u << 20) const {
    engine_config c;
    c.backend = "torch";
    c.model = model_path.string();
    c.kv_budget_bytes = kv_budget;
    c.scheduler_threads = 2;
    c.devices = {canopy::testing::test_device()};
    return c;
  }
  /// Asks other sequences of four times a KV storage of `capacity` tokens in all, which
  /// push out what it held (each pass keeps only the new KV the storage has room for,
  /// so it takes several).
  static void push_out_kv(engine& lm, std::size_t capacity, std::size_t context) {
    const auto filler_length = std::min(context, capacity / 4);
    for (std::size_t filler = 0; filler * filler_length < 4 * capacity; ++filler)
      lm.next_token_logprobs_sync(
          token_seq(filler_length, static_cast<std::int32_t>(3 + filler)));
  }
  std::filesystem::path model_path;
  std::vector<oracle_case> cases;
};

TEST_P(model_fidelity, uncached_rows_match) {
  CANOPY_LOAD_ORACLE_MODEL();
  engine lm{config()};
  for (const auto& c : cases)
    for (std::size_t i = 0; i < c.tokens.size(); ++i)
      EXPECT_LE(error(lm.next_token_logprobs_uncached(prefix(c.tokens, i + 1)), c, i),
                c.tolerance)
          << c.name << " row " << i;
  EXPECT_EQ(lm.stats().cache_hits, 0u);
}

TEST_P(model_fidelity, sync_rows_match_computed_and_then_as_cache_hits) {
  CANOPY_LOAD_ORACLE_MODEL();
  engine lm{config()};
  for (const auto& c : cases) {
    // The whole case first: its rows at every position are stored, so the shorter
    // prefixes that follow are cache hits and must be the same numbers.
    EXPECT_LE(error(lm.next_token_logprobs_sync(c.tokens), c, c.tokens.size() - 1),
              c.tolerance)
        << c.name;
    for (std::size_t i = 0; i < c.tokens.size(); ++i)
      EXPECT_LE(error(lm.next_token_logprobs_sync(prefix(c.tokens, i + 1)), c, i),
                c.tolerance)
          << c.name << " row " << i;
  }
  EXPECT_GT(lm.stats().cache_hits, 0u);
}

TEST_P(model_fidelity, async_batched_with_unrelated_queries_rows_match) {
  CANOPY_LOAD_ORACLE_MODEL();
  engine lm{config()};
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> token(0, static_cast<int>(cases[0].vocab) - 1);
  std::vector<std::future<at::Tensor>> unrelated;
  std::vector<std::vector<std::future<at::Tensor>>> rows(cases.size());
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const auto& c = cases[k];
    for (std::size_t i = 0; i < c.tokens.size(); ++i) {
      token_seq noise(1 + i % 7);
      for (auto& t : noise)
        t = token(rng);
      unrelated.push_back(lm.next_token_logprobs(noise));
      rows[k].push_back(lm.next_token_logprobs(prefix(c.tokens, i + 1)));
    }
  }
  for (std::size_t k = 0; k < cases.size(); ++k)
    for (std::size_t i = 0; i < rows[k].size(); ++i)
      EXPECT_LE(error(rows[k][i].get(), cases[k], i), cases[k].tolerance)
          << cases[k].name << " row " << i;
  for (auto& f : unrelated)
    EXPECT_EQ(f.get().numel(), cases[0].vocab);
  EXPECT_GT(lm.stats().mean_batch_size, 1.0) << "the queries were meant to share passes";
}

TEST_P(model_fidelity, two_workers_on_one_device_answer_every_row) {
  // Two workers on one device: a stand-in for several GPUs on a machine that has one.
  CANOPY_LOAD_ORACLE_MODEL();
  auto c2 = config();
  c2.devices = {canopy::testing::test_device(), canopy::testing::test_device()};
  engine lm{c2};
  std::vector<std::vector<std::future<at::Tensor>>> rows(cases.size());
  for (std::size_t k = 0; k < cases.size(); ++k)
    for (std::size_t i = 0; i < cases[k].tokens.size(); ++i)
      rows[k].push_back(lm.next_token_logprobs(prefix(cases[k].tokens, i + 1)));
  for (std::size_t k = 0; k < cases.size(); ++k)
    for (std::size_t i = 0; i < rows[k].size(); ++i)
      EXPECT_LE(error(rows[k][i].get(), cases[k], i), cases[k].tolerance)
          << cases[k].name << " row " << i;
  const auto stats = lm.stats();
  ASSERT_EQ(stats.workers.size(), 2u);
  for (const auto& w : stats.workers) {
    EXPECT_EQ(w.device, canopy::testing::test_device());
    EXPECT_EQ(w.state, "active");
  }
  EXPECT_EQ(stats.failed, 0u);
}

TEST_P(model_fidelity, after_cache_kv_of_a_prefix_only_the_rest_is_computed) {
  CANOPY_LOAD_ORACLE_MODEL();
  for (const auto& c : cases) {
    engine lm{config()};
    const auto k = c.tokens.size() / 2;
    lm.cache_kv(prefix(c.tokens, k));
    const auto before = lm.stats().tokens_computed;
    EXPECT_EQ(before, k);
    EXPECT_LE(error(lm.next_token_logprobs_sync(c.tokens), c, c.tokens.size() - 1),
              c.tolerance)
        << c.name;
    EXPECT_EQ(lm.stats().tokens_computed - before, c.tokens.size() - k) << c.name;
    for (std::size_t i = 0; i < c.tokens.size(); ++i)
      EXPECT_LE(error(lm.next_token_logprobs_sync(prefix(c.tokens, i + 1)), c, i),
                c.tolerance)
          << c.name << " row " << i;
  }
}

TEST_P(model_fidelity, extending_token_by_token_computes_each_token_once) {
  CANOPY_LOAD_ORACLE_MODEL();
  engine lm{config()};
  std::uint64_t tokens = 0;
  for (const auto& c : cases) {
    for (std::size_t i = 0; i < c.tokens.size(); ++i)
      EXPECT_LE(error(lm.next_token_logprobs_sync(prefix(c.tokens, i + 1)), c, i),
                c.tolerance)
          << c.name << " row " << i;
    tokens += c.tokens.size();
  }
  // Cases may share a first token (BOS): it is computed once.
  EXPECT_LE(lm.stats().tokens_computed, tokens);
  EXPECT_GE(lm.stats().tokens_computed, tokens - cases.size() + 1);
}

TEST_P(model_fidelity, after_the_prefix_kv_was_evicted_rows_are_recomputed_the_same) {
  CANOPY_LOAD_ORACLE_MODEL();
  engine probe{config()};
  const auto per_token = probe.model().kv_bytes_per_token;
  const auto context = static_cast<std::size_t>(probe.model().context_length);
  for (const auto& c : cases) {
    // A KV budget the prefix fits in (the cache keeps 7/8 of it), then other
    // sequences of four times the budget in all push the prefix's KV out (each pass
    // keeps only the new KV the storage has room for, so it takes several).
    const auto k = c.tokens.size() / 2;
    const std::size_t capacity = std::max<std::size_t>(48, k * 8 / 7 + 8);
    engine lm{config(per_token * capacity)};
    lm.cache_kv(prefix(c.tokens, k));
    push_out_kv(lm, capacity, context);
    const auto evictions = lm.stats().kv_evictions;
    EXPECT_GE(evictions, k) << "the prefix's KV should have been evicted";
    const auto before = lm.stats().tokens_computed;
    EXPECT_LE(error(lm.next_token_logprobs_sync(c.tokens), c, c.tokens.size() - 1),
              c.tolerance)
        << c.name;
    EXPECT_EQ(lm.stats().tokens_computed - before, c.tokens.size())
        << c.name << ": without its prefix KV the whole sequence is recomputed";
    for (std::size_t i = 0; i < c.tokens.size(); ++i)
      EXPECT_LE(error(lm.next_token_logprobs_sync(prefix(c.tokens, i + 1)), c, i),
                c.tolerance)
          << c.name << " row " << i;
  }
}

// The same eviction with a host tier large enough for everything: the prefix's KV is
// demoted instead of dropped and comes back, so only the rest is computed, and the
// rows are the oracle's (the host tier stores the device's format, byte for byte).
// Under a sliding window there is no host tier, and the prefix is recomputed.
TEST_P(model_fidelity,
       with_a_host_tier_an_evicted_prefix_comes_back_instead_of_recomputed) {
  CANOPY_LOAD_ORACLE_MODEL();
  engine probe{config()};
  const auto per_token = probe.model().kv_bytes_per_token;
  const auto context = static_cast<std::size_t>(probe.model().context_length);
  const bool tiered = probe.model().kv_window == 0;
  for (const auto& c : cases) {
    const auto k = c.tokens.size() / 2;
    const std::size_t capacity = std::max<std::size_t>(48, k * 8 / 7 + 8);
    auto settings = config(per_token * capacity);
    settings.kv_host_budget_bytes = per_token * capacity * 8;
    engine lm{settings};
    lm.cache_kv(prefix(c.tokens, k));
    push_out_kv(lm, capacity, context);
    const auto pushed = lm.stats();
    const auto& worker = pushed.workers.at(0);
    EXPECT_EQ(worker.kv_host_budget_bytes > 0, tiered) << c.name;
    EXPECT_LE(worker.kv_host_bytes, worker.kv_host_budget_bytes) << c.name;
    EXPECT_EQ(pushed.kv_demoted_bytes, pushed.kv_demotions * per_token) << c.name;
    if (tiered)
      EXPECT_GE(pushed.kv_demotions, k)
          << c.name << ": the prefix's KV should have been demoted";
    else
      EXPECT_EQ(pushed.kv_demotions, 0u) << c.name;
    EXPECT_LE(error(lm.next_token_logprobs_sync(c.tokens), c, c.tokens.size() - 1),
              c.tolerance)
        << c.name;
    const auto after = lm.stats();
    EXPECT_EQ(after.tokens_computed - pushed.tokens_computed,
              tiered ? c.tokens.size() - k : c.tokens.size())
        << c.name;
    EXPECT_GE(after.kv_promotions - pushed.kv_promotions, tiered ? k : 0) << c.name;
    EXPECT_EQ(after.kv_promoted_bytes, after.kv_promotions * per_token) << c.name;
    for (std::size_t i = 0; i < c.tokens.size(); ++i)
      EXPECT_LE(error(lm.next_token_logprobs_sync(prefix(c.tokens, i + 1)), c, i),
                c.tolerance)
          << c.name << " row " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(shared_models, model_fidelity, canopy::testing::oracle_models(),
                         canopy::testing::oracle_model_name);

class greedy_from_bos : public ::testing::TestWithParam<const char*> {};

TEST_P(greedy_from_bos, two_hundred_tokens_equal_the_reference) {
  CANOPY_SHARED_PATH_OR_SKIP(model, GetParam());
  CANOPY_SHARED_PATH_OR_SKIP(greedy, "oracle/stories260K/greedy.json");
  const auto expected = canopy::testing::read_json(greedy);
  engine_config c;
  c.backend = "torch";
  c.model = model.string();
  c.devices = {canopy::testing::test_device()};
  engine lm{c};
  // Both forms say BOS 1 and EOS 2: the .bin by its format, hf/ in config.json.
  EXPECT_EQ(lm.bos_token_id(), 1);
  EXPECT_EQ(lm.eos_token_ids(), (std::vector<std::int32_t>{2}));
  const auto ids = lm.sample(expected.at("start_tokens").get<token_seq>(),
                             expected.at("n").get<std::size_t>(), {}, 0.0);
  EXPECT_EQ(ids, expected.at("ids").get<token_seq>());
  EXPECT_EQ(lm.stats().tokens_computed, ids.size()) << "each step computes one new token";
}

INSTANTIATE_TEST_SUITE_P(shared_models, greedy_from_bos,
                         ::testing::Values("models/stories260K/stories260K.bin",
                                           "models/stories260K/hf"),
                         [](const auto& info) {
                           return std::string(info.index == 0 ? "bin" : "hf");
                         });

} // namespace
