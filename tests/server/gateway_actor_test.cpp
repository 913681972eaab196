// The gateway actor against a real engine on the mock backend: a job's rows equal the
// engine's own answers, sampling draws what engine::batch_sample draws, the first
// error ends a job exactly once, and a cancelled job is neither answered nor computed;
// next-byte jobs likewise, their answers those of engine::next_byte_logprobs.

#include "shared_fixtures.hpp"

#include <canopy/engine.hpp>
#include <canopy/messages/registration.hpp>
#include <canopy/server/api/gateway_actor.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/send.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <thread>

using canopy::token_seq;
using namespace canopy::server;
namespace msg = canopy::messages;
using namespace std::chrono_literals;

namespace {

caf::actor_system_config& with_types(caf::actor_system_config& config) {
  config.set("scheduler.max-threads", std::size_t{2});
  msg::add_message_types(config);
  return config;
}

canopy::engine_config mock_config() {
  canopy::engine_config config;
  config.backend = "mock";
  config.vocab_size = 40;
  config.context_length = 64;
  return config;
}

/// A `done` that hands its reply to the test, and counts how often it ran.
struct reply_probe {
  std::promise<gateway_reply> promise;
  std::future<gateway_reply> future = promise.get_future();
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);

  gateway_done done() {
    auto shared = std::make_shared<std::promise<gateway_reply>>(std::move(promise));
    return [shared, calls = calls](gateway_reply reply) {
      if (calls->fetch_add(1) == 0)
        shared->set_value(std::move(reply));
    };
  }
  gateway_reply get() {
    if (future.wait_for(10s) != std::future_status::ready)
      throw std::runtime_error("the gateway never answered");
    return future.get();
  }
};

struct gateway_test : ::testing::Test {
  caf::actor_system_config system_config;
  caf::actor_system system{with_types(system_config)};
  canopy::engine_config config = mock_config();
  std::optional<canopy::engine> lm;
  gateway_actor gateway;

  void start() {
    lm.emplace(system, config);
    gateway = spawn_gateway(system, lm->handle());
  }
  ~gateway_test() override {
    caf::anon_send_exit(gateway, caf::exit_reason::user_shutdown);
    lm.reset();
  }

  /// Sends a log-probs job for `sequences` as request `id`; `probe` gets its reply.
  void send_logprobs(request_id id, std::vector<token_seq> sequences, reply_probe& probe,
                     bool all_positions = false) {
    logprobs_job job;
    job.sequences = std::move(sequences);
    job.all_positions = all_positions;
    job.done = probe.done();
    caf::anon_send(gateway, msg::logprobs_atom::value, id, std::move(job));
  }

  /// Sends a next-byte job for `items` as request `id`; `probe` gets its reply.
  void send_next_byte(request_id id, std::vector<next_byte_item> items,
                      reply_probe& probe) {
    next_byte_job job;
    job.items = std::make_shared<const std::vector<next_byte_item>>(std::move(items));
    job.reduce = canopy::backends::byte_reduce::max;
    job.done = probe.done();
    caf::anon_send(gateway, msg::next_byte_atom::value, id, std::move(job));
  }

  /// The engine's own row after `tokens`, decoded.
  std::vector<float> engine_row(const token_seq& tokens) {
    auto t = lm->next_token_logprobs_sync(tokens);
    return {t.data_ptr<float>(), t.data_ptr<float>() + t.numel()};
  }
  static std::vector<float> values(const canopy::cache::row_ptr& row) {
    std::vector<float> out(row->vocab());
    row->decode(out.data());
    return out;
  }
};

TEST_F(gateway_test, a_logprobs_job_answers_every_sequence_and_every_position) {
  start();
  reply_probe probe;
  send_logprobs(request_id{1}, {{1, 2, 3}, {7}}, probe, /*all_positions=*/true);
  auto reply = probe.get();
  ASSERT_FALSE(reply.error) << reply.error->message;
  ASSERT_EQ(reply.answers.size(), 2u);
  EXPECT_EQ(reply.answers[0].tokens, (token_seq{1, 2, 3}));
  ASSERT_EQ(reply.answers[0].rows.size(), 3u);
  EXPECT_EQ(values(reply.answers[0].rows[0]), engine_row({1}));
  EXPECT_EQ(values(reply.answers[0].rows[1]), engine_row({1, 2}));
  EXPECT_EQ(values(reply.answers[0].rows[2]), engine_row({1, 2, 3}));
  ASSERT_EQ(reply.answers[1].rows.size(), 1u);
  EXPECT_EQ(values(reply.answers[1].rows[0]), engine_row({7}));
  EXPECT_GT(reply.engine_ms, 0.0);
}

TEST_F(gateway_test, sampling_draws_what_batch_sample_draws) {
  start();
  for (double temperature : {0.0, 1.0}) {
    reply_probe probe;
    sample_job job;
    job.prompts = {{1, 2}, {3}};
    job.max_tokens = 6;
    job.eos_token_ids = {5};
    job.temperature = temperature;
    job.seed = 42;
    job.done = probe.done();
    caf::anon_send(gateway, sample_atom::value, request_id{2}, std::move(job));
    auto reply = probe.get();
    ASSERT_FALSE(reply.error) << reply.error->message;
    EXPECT_EQ(reply.generated, lm->batch_sample({{1, 2}, {3}}, 6, {5}, temperature, 42))
        << "temperature " << temperature;
  }
}

TEST_F(gateway_test, on_token_sees_each_token_as_drawn_and_can_stop_its_prompt) {
  start();
  const auto expected = lm->batch_sample({{1, 2}, {3}}, 6, {}, 1.0, 42);
  ASSERT_EQ(expected[1].size(), 6u);
  struct seen {
    std::size_t prompt;
    std::int32_t id;
    float logprob;
    bool last;
  };
  // on_token runs on the gateway's thread, one call at a time.
  auto tokens = std::make_shared<std::vector<seen>>();
  reply_probe probe;
  sample_job job;
  job.prompts = {{1, 2}, {3}};
  job.max_tokens = 6;
  job.temperature = 1.0;
  job.seed = 42;
  job.top_logprobs = 2;
  job.on_token = [tokens, calls = probe.calls](const sampled_token& t) {
    EXPECT_EQ(*calls, 0) << "a token after done";
    EXPECT_TRUE(t.score);
    tokens->push_back({t.prompt, t.id, t.score ? t.score->logprob : 0.0f, t.last});
    // Prompt 0 stops at its third token, as a stop string would end it.
    return t.prompt == 0 &&
           std::count_if(tokens->begin(), tokens->end(),
                         [](const seen& s) { return s.prompt == 0; }) == 3;
  };
  job.done = probe.done();
  caf::anon_send(gateway, sample_atom::value, request_id{9}, std::move(job));
  auto reply = probe.get();
  ASSERT_FALSE(reply.error) << reply.error->message;
  EXPECT_EQ(reply.generated[0], token_seq(expected[0].begin(), expected[0].begin() + 3));
  EXPECT_EQ(reply.generated[1], expected[1]);
  EXPECT_EQ(reply.stopped, std::vector<bool>({true, false}));
  // Every token, in the order drawn, each scored by its own row.
  std::vector<token_seq> by_prompt(2);
  for (const auto& t : *tokens) {
    const auto& context = by_prompt[t.prompt];
    token_seq before = t.prompt == 0 ? token_seq{1, 2} : token_seq{3};
    before.insert(before.end(), context.begin(), context.end());
    EXPECT_EQ(t.logprob, engine_row(before)[static_cast<std::size_t>(t.id)]);
    by_prompt[t.prompt].push_back(t.id);
    EXPECT_EQ(t.last, t.prompt == 1 && by_prompt[1].size() == 6) << "max_tokens";
  }
  EXPECT_EQ(by_prompt, reply.generated);
}

TEST_F(gateway_test, the_first_error_ends_the_job_once_and_the_gateway_keeps_serving) {
  start();
  reply_probe probe;
  // 40 is past the 40-entry vocabulary.
  send_logprobs(request_id{3}, {{1, 2}, {1, 40}, {3}}, probe);
  auto reply = probe.get();
  ASSERT_TRUE(reply.error);
  EXPECT_EQ(reply.error->status, 400);
  EXPECT_EQ(reply.error->code, "token_out_of_range");
  EXPECT_NE(reply.error->message.find("token id 40"), std::string::npos);

  reply_probe next;
  send_logprobs(request_id{4}, {{4}}, next);
  EXPECT_FALSE(next.get().error);
  std::this_thread::sleep_for(50ms); // late answers of job 3's other queries
  EXPECT_EQ(*probe.calls, 1);
}

TEST_F(gateway_test, an_empty_sequence_is_refused_by_name) {
  start();
  reply_probe probe;
  send_logprobs(request_id{5}, {{1}, {}}, probe);
  auto reply = probe.get();
  ASSERT_TRUE(reply.error);
  EXPECT_EQ(reply.error->code, "empty_sequence");
  EXPECT_NE(reply.error->message.find("sequence 1"), std::string::npos);
}

TEST_F(gateway_test, a_cancelled_job_is_neither_answered_nor_computed) {
  config.flush_when_idle = false;
  config.batch_timeout_ms = 300;
  start();
  reply_probe probe;
  send_logprobs(request_id{6}, {{9, 9, 9}, {8}}, probe);
  caf::anon_send(gateway, msg::cancel_atom::value, request_id{6});
  // Past the batch window: a query still waiting would have been computed by now.
  std::this_thread::sleep_for(600ms);
  EXPECT_EQ(*probe.calls, 0);
  auto stats = lm->stats();
  EXPECT_EQ(stats.tokens_computed, 0u);
  EXPECT_EQ(stats.in_flight, 0u);
}

TEST_F(gateway_test, cache_kv_and_clear_jobs_complete) {
  start();
  reply_probe kv;
  caf::anon_send(gateway, cache_kv_atom::value, request_id{7},
                 cache_kv_job{{1, 2, 3, 4}, {}, kv.done()});
  EXPECT_FALSE(kv.get().error);
  EXPECT_EQ(lm->stats().tokens_computed, 4u);
  EXPECT_GT(lm->stats().kv_bytes.at(0), 0u);

  reply_probe clear;
  caf::anon_send(gateway, msg::clear_atom::value, clear_job{false, "", clear.done()});
  EXPECT_FALSE(clear.get().error);
  EXPECT_EQ(lm->stats().logprob_bytes, 0u);
  EXPECT_EQ(lm->stats().kv_bytes.at(0), 0u);
}

TEST_F(gateway_test, stopping_the_gateway_answers_its_open_jobs) {
  config.flush_when_idle = false;
  config.batch_timeout_ms = 60000;
  start();
  reply_probe probe;
  send_logprobs(request_id{8}, {{1, 1}}, probe);
  std::this_thread::sleep_for(50ms);
  caf::anon_send_exit(gateway, caf::exit_reason::user_shutdown);
  auto reply = probe.get();
  ASSERT_TRUE(reply.error);
  EXPECT_EQ(reply.error->code, "shutting_down");
  EXPECT_EQ(reply.error->status, 503);
}

TEST_F(gateway_test, a_next_byte_job_without_a_tokenizer_fails_by_name) {
  start();
  reply_probe probe;
  send_next_byte(request_id{9}, {{{1, 2}, "a"}}, probe);
  auto reply = probe.get();
  ASSERT_TRUE(reply.error);
  EXPECT_EQ(reply.error->code, "no_tokenizer");
}

TEST_F(gateway_test, a_next_byte_job_answers_every_item_as_the_engine_does) {
  CANOPY_SHARED_PATH_OR_SKIP(tokenizer, "models/tokenizers/llama3/tokenizer.json");
  config.tokenizer = tokenizer.string();
  start();
  // More items than a job asks at once, so later ones are asked as answers come back.
  std::vector<next_byte_item> items;
  for (std::int32_t i = 0; i < static_cast<std::int32_t>(rows_in_flight_per_job) + 6; ++i)
    items.push_back({{1, 100 + i % 9}, i % 2 ? std::string(" ") : std::string()});
  reply_probe probe;
  send_next_byte(request_id{10}, items, probe);
  auto reply = probe.get();
  ASSERT_FALSE(reply.error) << reply.error->message;
  ASSERT_EQ(reply.distributions.size(), items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto want = lm->next_byte_logprobs(items[i].tokens, items[i].prefix,
                                             canopy::backends::byte_reduce::max)
                          .get();
    EXPECT_EQ(reply.distributions[i].logprobs, want.logprobs) << "item " << i;
    EXPECT_EQ(reply.distributions[i].eos, want.eos) << "item " << i;
  }
  EXPECT_EQ(lm->stats().next_byte_masses_made, 9u); // one per distinct sequence
}

TEST_F(gateway_test, a_cancelled_next_byte_job_is_neither_answered_nor_computed) {
  CANOPY_SHARED_PATH_OR_SKIP(tokenizer, "models/tokenizers/llama3/tokenizer.json");
  config.tokenizer = tokenizer.string();
  config.flush_when_idle = false;
  config.batch_timeout_ms = 300;
  start();
  reply_probe probe;
  send_next_byte(request_id{11}, {{{9, 9, 9}, ""}, {{8}, "61"}}, probe);
  caf::anon_send(gateway, msg::cancel_atom::value, request_id{11});
  std::this_thread::sleep_for(600ms);
  EXPECT_EQ(*probe.calls, 0);
  auto stats = lm->stats();
  EXPECT_EQ(stats.tokens_computed, 0u);
  EXPECT_EQ(stats.in_flight, 0u);
}

} // namespace
