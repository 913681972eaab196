// A sliding-window model (the mock reading KV through a window W, as mistral-swa
// does) under a KV budget that holds every particle's window but not their whole
// sequences. A long SMC run with resampling and multi-token extensions must compute
// each token once, answer the reference, keep KV under the budget and fail no pass:
// the mock fails a pass whose window of prefix KV was released, so KV dropped under
// a pass (a prefix read from far above the query's own window, which the cache pins)
// would show. The same run without a window cannot keep its KV in that budget.

#include "reference.hpp"
#include "settled_stats.hpp"

#include <canopy/engine.hpp>

#include <gtest/gtest.h>

#include <set>
#include <vector>

using canopy::engine;
using canopy::engine_config;
using canopy::token_seq;
using canopy::testing::equals_reference;

namespace {

constexpr std::int64_t window = 8;
constexpr std::size_t particles = 8;
constexpr std::size_t steps = 120;
constexpr std::uint64_t kv_bytes_per_token = 100;

engine_config windowed_config(std::int64_t kv_window) {
  engine_config config;
  config.backend = "mock";
  config.vocab_size = 64;
  config.context_length = 1024;
  config.mock_kv_window = kv_window;
  config.mock_kv_bytes_per_token = kv_bytes_per_token;
  // Each particle keeps its window, plus a pinned prefix's when it extends by
  // several tokens: W + 3 tokens, and one more for room.
  config.kv_budget_bytes = particles * (window + 4) * kv_bytes_per_token;
  config.scheduler_threads = 2;
  return config;
}

struct smc_outcome {
  std::uint64_t distinct_prefixes = 0; // tokens a perfect cache computes once each
  canopy::engine_stats stats;
};

// Particles extend a shared prompt; every 10th step each takes three tokens at once
// (a pass continuing a prefix three tokens up), every 7th step half of them are
// replaced by copies of the others (resampling). Every row is checked.
smc_outcome run_smc(const engine_config& config) {
  engine lm{config};
  std::vector<token_seq> seqs(particles, token_seq{1, 2, 3, 4, 5});
  std::set<token_seq> prefixes;
  for (std::size_t step = 0; step < steps; ++step) {
    for (std::size_t p = 0; p < particles; ++p) {
      const std::size_t extra = step % 10 == 9 ? 3 : 1;
      for (std::size_t k = 0; k < extra; ++k)
        seqs[p].push_back(
            static_cast<canopy::cache::token_id>((step * 7 + p * 3 + k * 11) % 64));
    }
    const at::Tensor rows = lm.batch_next_token_logprobs(seqs);
    for (std::size_t p = 0; p < particles; ++p) {
      EXPECT_TRUE(equals_reference(rows[static_cast<std::int64_t>(p)], config, seqs[p]))
          << "particle " << p << " at step " << step;
      for (std::size_t n = 1; n <= seqs[p].size(); ++n)
        prefixes.insert(token_seq(seqs[p].begin(), seqs[p].begin() + n));
    }
    if (step % 7 == 6)
      for (std::size_t p = 0; p < particles / 2; ++p)
        seqs[particles / 2 + p] = seqs[p];
  }
  return {prefixes.size(), canopy::testing::stats_once_locks_released(lm)};
}

TEST(engine_window, smc_under_a_window_computes_each_token_once_within_the_budget) {
  const engine_config config = windowed_config(window);
  const smc_outcome out = run_smc(config);
  EXPECT_EQ(out.stats.failed, 0u);
  EXPECT_EQ(out.stats.failed_passes, 0u);
  EXPECT_EQ(out.stats.tokens_computed, out.distinct_prefixes);
  EXPECT_GT(out.stats.kv_evictions, 0u) << "the budget never bound";
  EXPECT_EQ(out.stats.refused_attaches, 0u);
  ASSERT_EQ(out.stats.kv_bytes.size(), 1u);
  EXPECT_LE(out.stats.kv_bytes[0], config.kv_budget_bytes);
  EXPECT_EQ(out.stats.locked_nodes, 0u);
}

TEST(engine_window, without_a_window_the_same_budget_cannot_keep_the_particles_kv) {
  // Full attention needs each particle's whole sequence of KV, which this budget
  // cannot hold: KV is refused and recomputed, so the window is what made it fit.
  const smc_outcome out = run_smc(windowed_config(0));
  EXPECT_EQ(out.stats.failed, 0u);
  EXPECT_GT(out.stats.tokens_computed, 2 * out.distinct_prefixes);
}

} // namespace
