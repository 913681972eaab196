// 64 concurrent callers, over 100,000 queries on a shared-prefix workload with exact
// repeats: every answer equals the uncached path's value bit for bit.

#include "reference.hpp"
#include "settled_stats.hpp"

#include <canopy/engine.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

using canopy::engine;
using canopy::engine_config;
using canopy::token_seq;

namespace {

TEST(engine_concurrency, many_callers_get_exactly_the_uncached_answer) {
  engine_config config;
  config.backend = "mock";
  config.vocab_size = 64;
  config.scheduler_threads = 2;
  config.batch_size = 32;
  engine lm{config};
  constexpr int callers = 64;
  constexpr int queries_per_caller = 1600; // 102,400 queries
  // A shared prompt, then short random continuations over a small alphabet, so
  // prefixes are shared and exact repeats are frequent.
  const token_seq prompt{1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<token_seq> distinct;
  std::mt19937 gen(7);
  for (int i = 0; i < 400; ++i) {
    token_seq s = prompt;
    auto extra = 1 + gen() % 6;
    for (unsigned j = 0; j < extra; ++j)
      s.push_back(static_cast<std::int32_t>(gen() % 6));
    distinct.push_back(s);
  }
  // The uncached path's answers, computed first through the engine itself.
  std::vector<std::vector<float>> expected;
  for (std::size_t i = 0; i < distinct.size(); i += 57) {
    auto row = lm.next_token_logprobs_uncached(distinct[i]);
    ASSERT_TRUE(canopy::testing::equals_reference(row, config, distinct[i]));
  }
  for (const auto& s : distinct)
    expected.push_back(canopy::testing::reference_row(config, s));

  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < callers; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937 pick(1000 + c);
      // Each caller keeps a window of queries in flight, as SMC particles do.
      std::vector<std::pair<std::size_t, std::future<at::Tensor>>> window;
      auto settle = [&](std::pair<std::size_t, std::future<at::Tensor>>& q) {
        try {
          auto row = q.second.get();
          if (!std::equal(expected[q.first].begin(), expected[q.first].end(),
                          row.data_ptr<float>()))
            ++wrong;
        } catch (const std::exception&) {
          ++failed;
        }
      };
      for (int q = 0; q < queries_per_caller; ++q) {
        auto index = pick() % distinct.size();
        window.emplace_back(index, lm.next_token_logprobs(distinct[index]));
        if (window.size() == 8) {
          for (auto& w : window)
            settle(w);
          window.clear();
        }
      }
      for (auto& w : window)
        settle(w);
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(failed, 0);
  auto stats = lm.stats();
  EXPECT_GE(stats.answered, std::uint64_t{callers} * queries_per_caller);
  EXPECT_EQ(stats.failed, 0u);
  EXPECT_GT(stats.cache_hits, 0u);
  EXPECT_EQ(canopy::testing::stats_once_locks_released(lm).locked_nodes, 0u);
}

} // namespace
