#pragma once
// What the multi-process tests share: `canopy worker` processes on loopback, fronts as
// engines in the test process (workers 0, remote_workers), an SMC-shaped workload
// whose sequences do not depend on the answers (so every answer can be checked), and
// polling the front's stats until a condition holds (bounded in time).
// Thread contract: test-thread helpers; the workload's callers run on threads of
// their own and only read what is shared.

#include "canopy_process.hpp"

#include <canopy/actors/engine_actors.hpp>
#include <canopy/backends/mock_backend.hpp>
#include <canopy/engine.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace canopy::testing {

/// The mock every worker and front of these tests agree on.
inline const std::vector<std::string> cluster_mock_flags = {
    "--backend", "mock", "--vocab_size", "128", "--context_length", "256"};

inline engine_config cluster_mock_config() {
  engine_config c;
  c.backend = "mock";
  c.vocab_size = 128;
  c.context_length = 256;
  return c;
}

/// A front with no device of its own, driving `workers`.
inline engine_config front_config(const std::vector<std::string>& workers,
                                  engine_config base = cluster_mock_config()) {
  base.workers = 0;
  base.remote_workers = workers;
  base.worker_timeout_ms = 1000;
  return base;
}

/// The cluster's mock flags, then `more`.
inline std::vector<std::string> flags_with(std::vector<std::string> more) {
  return flags_with(std::move(more), cluster_mock_flags);
}

/// True when `row` is, bit for bit, the mock's row after `tokens`.
inline bool is_mock_row(const at::Tensor& row, const token_seq& tokens) {
  const auto spec = actors::backend_spec_for(cluster_mock_config(), "cpu");
  const auto expected = backends::mock_logprobs(spec.mock, tokens.data(), tokens.size());
  return row.numel() == static_cast<std::int64_t>(expected.size()) &&
         std::memcmp(row.data_ptr<float>(), expected.data(),
                     expected.size() * sizeof(float)) == 0;
}

/// SMC-shaped: four SMC runs of 16 particles each (four users' problems, so that there
/// is work for several workers: one run's KV lives where its prompt was computed), each
/// extending its own 8-token prompt one token per step; the particles of a group of
/// four draw the same token (exact duplicates, which merge), and every 40 steps each
/// group starts a new branch from its prompt (shared prefixes). Query (particle, step)
/// is a pure function of both, so answers can be checked.
inline token_seq smc_query(std::size_t particle, std::size_t step, std::int32_t vocab) {
  const auto run = static_cast<std::int32_t>(particle / 16);
  token_seq s = {1 + run, 7, 3, 9, 4, 2, 8, 5};
  const auto group = static_cast<std::int32_t>(particle / 4);
  const auto branch = static_cast<std::int32_t>(step / 40);
  for (std::size_t k = 0; k <= step % 40; ++k)
    s.push_back((group * 31 + static_cast<std::int32_t>(k) * 7 + branch * 13 + 11) %
                vocab);
  return s;
}

/// Distinct prefixes of the workload's queries: the tokens an engine computing each
/// token once computes.
inline std::size_t smc_unique_tokens(std::size_t particles, std::size_t steps,
                                     std::int32_t vocab) {
  std::set<token_seq> prefixes;
  for (std::size_t p = 0; p < particles; ++p)
    for (std::size_t s = 0; s < steps; ++s) {
      const auto q = smc_query(p, s, vocab);
      for (std::size_t n = 1; n <= q.size(); ++n)
        prefixes.emplace(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(n));
    }
  return prefixes.size();
}

struct workload_tally {
  std::atomic<std::size_t> answered{0}, wrong{0}, errors{0};
  std::mutex mutex;
  std::vector<std::string> error_codes; // of the errors, in order
};

/// `particles` callers on their own threads, each asking `steps` queries one after
/// another through the blocking API; every answer checked with `check`.
inline void
run_smc(engine& lm, std::size_t particles, std::size_t steps, workload_tally& tally,
        const std::function<bool(const at::Tensor&, const token_seq&)>& check) {
  std::vector<std::thread> callers;
  for (std::size_t p = 0; p < particles; ++p)
    callers.emplace_back([&, p] {
      for (std::size_t s = 0; s < steps; ++s) {
        const auto tokens = smc_query(p, s, static_cast<std::int32_t>(lm.vocab_size()));
        try {
          const auto row = lm.next_token_logprobs_sync(tokens);
          if (!check(row, tokens))
            ++tally.wrong;
          ++tally.answered;
        } catch (const canopy::error& e) {
          ++tally.errors;
          std::lock_guard<std::mutex> guard{tally.mutex};
          tally.error_codes.push_back(std::string(to_string(e.code())) + ": " + e.what());
        }
      }
    });
  for (auto& c : callers)
    c.join();
}

/// Every query of run_smc answered with the right row, none with an error.
inline void expect_all_answered_right(const workload_tally& tally, std::size_t queries) {
  EXPECT_EQ(tally.answered, queries);
  EXPECT_EQ(tally.wrong, 0u);
  EXPECT_EQ(tally.errors, 0u) << (tally.error_codes.empty() ? ""
                                                            : tally.error_codes.front());
}

/// Polls `condition` on the front's stats every 10 ms for at most `patience`.
inline bool eventually(engine& lm,
                       const std::function<bool(const engine_stats&)>& condition,
                       std::chrono::milliseconds patience = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition(lm.stats()))
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return condition(lm.stats());
}

/// The figures of the worker on node `address` (the first, if it has several).
inline const worker_stats* worker_on(const engine_stats& s, const std::string& address) {
  for (const auto& w : s.workers)
    if (w.node == address)
      return &w;
  return nullptr;
}

inline const node_stats* node_at(const engine_stats& s, const std::string& address) {
  for (const auto& n : s.nodes)
    if (n.address == address)
      return &n;
  return nullptr;
}

} // namespace canopy::testing
