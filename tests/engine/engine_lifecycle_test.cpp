// No caller ever hangs: cancellation, shutdown, deadlines and failing backends all
// answer every waiting query.

#include "reference.hpp"

#include <canopy/engine.hpp>

#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <chrono>

using namespace std::chrono_literals;
using canopy::engine;
using canopy::engine_config;
using canopy::errc;
using canopy::token_seq;

namespace {

engine_config slow_config() {
  engine_config config;
  config.backend = "mock";
  config.vocab_size = 32;
  config.scheduler_threads = 2;
  config.mock_cost_per_pass_us = 300000; // each pass takes 0.3 s
  config.batch_size = 2;
  return config;
}

errc outcome(std::future<at::Tensor>& f) {
  if (f.wait_for(10s) != std::future_status::ready)
    ADD_FAILURE() << "a caller was left waiting";
  try {
    f.get();
  } catch (const canopy::error& e) {
    return e.code();
  }
  return errc::none;
}

TEST(engine_lifecycle, reset_async_queries_answers_every_waiting_query) {
  engine lm{slow_config()};
  std::vector<std::future<at::Tensor>> futures;
  for (int i = 0; i < 6; ++i)
    futures.push_back(lm.next_token_logprobs({i}));
  std::this_thread::sleep_for(50ms); // the first batch is now running
  lm.reset_async_queries();
  for (auto& f : futures)
    EXPECT_EQ(outcome(f), errc::cancelled);
  auto after = lm.next_token_logprobs({9});
  EXPECT_EQ(outcome(after), errc::none);
}

TEST(engine_lifecycle, destroying_the_engine_answers_every_waiting_query) {
  std::vector<std::future<at::Tensor>> futures;
  {
    engine lm{slow_config()};
    for (int i = 0; i < 6; ++i)
      futures.push_back(lm.next_token_logprobs({i, i}));
    std::this_thread::sleep_for(50ms);
  }
  for (auto& f : futures)
    EXPECT_EQ(outcome(f), errc::shutting_down);
}

TEST(engine_lifecycle, a_query_past_its_deadline_fails_with_deadline_exceeded) {
  engine lm{slow_config()};
  auto slow = lm.next_token_logprobs({1, 2, 3}, {0, 20.0});
  EXPECT_EQ(outcome(slow), errc::deadline_exceeded);
}

TEST(engine_lifecycle, a_throwing_host_backend_fails_its_queries_and_not_the_engine) {
  struct flaky : canopy::backends::backend_i {
    std::unique_ptr<canopy::backends::backend_i> inner =
        canopy::backends::make_mock_backend({});
    int passes = 0;
    const canopy::backends::model_info& info() const override { return inner->info(); }
    canopy::backends::pass_result run(const canopy::backends::pass_request& r) override {
      // As LibTorch throws: a c10::Error, whose what() carries a C++ backtrace.
      TORCH_CHECK(passes++ != 0, "device fell over");
      return inner->run(r);
    }
    void release_kv(const std::vector<canopy::cache::kv_handle>& h) override {
      inner->release_kv(h);
    }
    std::size_t kv_entries() const override { return inner->kv_entries(); }
  };
  engine_config config;
  config.backend = "mock";
  config.scheduler_threads = 2;
  config.backend_factory = [](std::uint32_t, const std::string&) {
    return std::make_unique<flaky>();
  };
  engine lm{config};
  try {
    lm.next_token_logprobs_sync({1, 2});
    FAIL() << "the failing pass was not reported";
  } catch (const canopy::error& e) {
    EXPECT_EQ(e.code(), errc::backend_failure);
    EXPECT_NE(std::string(e.what()).find("device fell over"), std::string::npos);
    EXPECT_EQ(std::string(e.what()).find("Exception raised from"), std::string::npos)
        << "the client gets no LibTorch stack trace: " << e.what();
  }
  EXPECT_EQ(lm.next_token_logprobs_sync({1, 2}).size(0), lm.vocab_size());
}

} // namespace
