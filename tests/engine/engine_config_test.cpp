// engine_config: JSON and command-line settings share keys; every malformed setting
// is refused with errc::invalid_config naming the key.

#include <canopy/actor_system_setup.hpp>
#include <canopy/engine.hpp>
#include <canopy/engine_config.hpp>

#include <caf/actor_system_config.hpp>
#include <caf/config_value.hpp>

#include <atomic>
#include <chrono>
#include <sys/prctl.h>
#include <thread>

#include <gtest/gtest.h>

using canopy::engine_config;
using canopy::errc;

namespace {

std::string config_error(const std::function<void()>& call) {
  try {
    call();
  } catch (const canopy::error& e) {
    EXPECT_EQ(e.code(), errc::invalid_config);
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

bool mentions(const std::string& text, const std::string& word) {
  return text.find(word) != std::string::npos;
}

TEST(engine_config, from_json_reads_every_key_and_round_trips) {
  auto config = engine_config::from_json(
      R"({"vocab_size": 1000, "batch_size": 8, "batch_timeout_ms": 0.5,
        "flush_when_idle": false, "eviction_policy": "lfu", "logprob_dtype": "bfloat16",
        "devices": ["cpu", "cpu"], "kv_budget_bytes": 4096, "max_context_length": 4000})");
  EXPECT_EQ(config.vocab_size, 1000);
  EXPECT_EQ(config.max_context_length, 4000u);
  EXPECT_EQ(config.batch_size, 8u);
  EXPECT_DOUBLE_EQ(config.batch_timeout_ms, 0.5);
  EXPECT_FALSE(config.flush_when_idle);
  EXPECT_EQ(config.eviction_policy, "lfu");
  EXPECT_EQ(config.device_list().size(), 2u);
  auto again = engine_config::from_json(config.to_json());
  EXPECT_EQ(again.to_json(), config.to_json());
}

// Note [poll sleep]: the setting reaches CAF's scheduler, and the system's threads get
// a timer slack short enough for such sleeps to mean what they say.
TEST(engine_config, the_poll_sleep_reaches_cafs_scheduler_and_is_checked) {
  engine_config config;
  config.set("scheduler_poll_sleep_us", "3");
  caf::actor_system_config system_config;
  canopy::configure_actor_system(system_config, config, canopy::network_role::none);
  const auto sleep = caf::get_or(system_config, "work-stealing.moderate-sleep-duration",
                                 caf::timespan{0});
  EXPECT_EQ(sleep, caf::timespan{std::chrono::microseconds(3)});
  EXPECT_TRUE(mentions(config_error([&] {
                         auto bad = config;
                         bad.set("scheduler_poll_sleep_us", "-1");
                         bad.validate();
                       }),
                       "scheduler_poll_sleep_us"));
  // A thread the actor system starts runs with a 1 us slack (default: 50 us).
  config.set("scheduler_poll_sleep_us", "50");
  config.backend = "mock";
  canopy::engine engine(config);
  std::atomic<long> slack{0};
  engine.next_token_logprobs({1, 2, 3}, [&slack](canopy::logprobs_result) {
    slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0); // on an actor system thread
  });
  for (int i = 0; i < 1000 && slack == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(slack, 1000);
}

TEST(engine_config, command_line_values_use_the_same_keys) {
  engine_config config;
  config.set("batch_size", "16");
  config.set("eviction_policy", "fifo");
  config.set("flush_when_idle", "false");
  config.set("devices", R"(["cpu"])");
  config.set("max_context_length", "2048");
  config.set("adapters", "a=/x,b=/y/z");
  EXPECT_EQ(config.adapter_list(), (std::vector<std::pair<std::string, std::string>>{
                                       {"a", "/x"}, {"b", "/y/z"}}))
      << "a list given as text separated by commas";
  EXPECT_EQ(config.max_context_length, 2048u);
  EXPECT_EQ(config.batch_size, 16u);
  EXPECT_EQ(config.eviction_policy, "fifo");
  EXPECT_FALSE(config.flush_when_idle);
  EXPECT_TRUE(
      mentions(config_error([&] { config.set("batch_size", "many"); }), "batch_size"));
}

TEST(engine_config, batch_size_zero_is_the_devices_default) {
  engine_config config;
  EXPECT_EQ(config.batch_size, 0u) << "the default asks for the devices' own";
  config.devices = {"cpu", "cpu"};
  EXPECT_EQ(config.batch_size_in_effect(), 64u);
  config.devices = {"cuda:0", "cuda:1"};
  EXPECT_EQ(config.batch_size_in_effect(), 256u);
  config.devices = {"cuda:0", "cpu"};
  EXPECT_EQ(config.batch_size_in_effect(), 64u) << "a CPU worker sets the pace";
  config.devices.clear();
  config.workers = 0;
  EXPECT_EQ(config.batch_size_in_effect(), 64u) << "a front of remote workers";
  config.devices = {"cuda:0"};
  config.batch_size = 8;
  EXPECT_EQ(config.batch_size_in_effect(), 8u) << "a size given is the size";
  EXPECT_NO_THROW(engine_config::from_json(R"({"batch_size": 0})"));
}

TEST(engine_config, malformed_settings_name_what_is_wrong) {
  EXPECT_TRUE(
      mentions(config_error([] { engine_config::from_json("{not json"); }), "JSON"));
  EXPECT_TRUE(mentions(config_error([] { engine_config::from_json("[1]"); }), "object"));
  auto unknown = config_error([] { engine_config::from_json(R"({"batchsize": 3})"); });
  EXPECT_TRUE(mentions(unknown, "batchsize") && mentions(unknown, "batch_size"));
  EXPECT_TRUE(
      mentions(config_error([] { engine_config::from_json(R"({"batch_size": "8"})"); }),
               "batch_size"));
  EXPECT_TRUE(
      mentions(config_error([] { engine_config::from_json(R"({"batch_size": -1})"); }),
               "batch_size"));
  EXPECT_TRUE(mentions(
      config_error([] { engine_config::from_json(R"({"eviction_policy": "random"})"); }),
      "random"));
  EXPECT_TRUE(mentions(
      config_error([] { engine_config::from_json(R"({"logprob_dtype": "int8"})"); }),
      "int8"));
  EXPECT_TRUE(mentions(
      config_error([] { engine_config::from_json(R"({"backend": "gguf"})"); }), "gguf"));
  const auto int4 =
      config_error([] { engine_config::from_json(R"({"kv_dtype": "int4"})"); });
  EXPECT_TRUE(mentions(int4, "kv_dtype") && mentions(int4, "int4") &&
              mentions(int4, "int8"));
  EXPECT_TRUE(mentions(
      config_error([] { engine_config::from_json(R"({"devices": ["tpu:0"]})"); }),
      "tpu:0"));
  EXPECT_TRUE(
      mentions(config_error([] { engine_config::from_json(R"({"vocab_size": 1})"); }),
               "vocab_size"));
}

TEST(engine_config, remote_worker_settings_are_checked_by_name) {
  auto config = engine_config::from_json(
      R"({"workers": 0, "remote_workers": ["127.0.0.1:7101", "[::1]:7102"],
        "worker_timeout_ms": 500, "worker_passes_in_flight": 2})");
  EXPECT_TRUE(config.device_list().empty()) << "a front only";
  EXPECT_EQ(config.remote_workers.size(), 2u);
  EXPECT_EQ(config.worker_passes_in_flight, 2u);
  EXPECT_FALSE(config.tls());
  EXPECT_TRUE(
      mentions(config_error([] { engine_config::from_json(R"({"workers": 0})"); }),
               "needs remote_workers"));
  for (const char* bad : {R"(["localhost"])", R"(["h:0"])", R"(["h:70000"])",
                          R"([":7101"])", R"(["h:71x"])"})
    EXPECT_TRUE(mentions(config_error([&] {
                           engine_config::from_json(
                               std::string(R"({"remote_workers": )") + bad + "}");
                         }),
                         "remote_workers"))
        << bad;
  EXPECT_TRUE(mentions(
      config_error([] { engine_config::from_json(R"({"worker_timeout_ms": 0})"); }),
      "worker_timeout_ms"));
  EXPECT_TRUE(mentions(
      config_error([] { engine_config::from_json(R"({"worker_passes_in_flight": 0})"); }),
      "worker_passes_in_flight"));
  EXPECT_TRUE(mentions(config_error([] {
                         engine_config::from_json(
                             R"({"tls_cert": "a.pem", "tls_key": "a.key"})");
                       }),
                       "all three"));
}

TEST(engine_config, an_engine_refuses_an_invalid_config) {
  engine_config config;
  config.workers = 0;
  EXPECT_TRUE(mentions(config_error([&] { canopy::engine lm{config}; }), "workers"));
  config = engine_config{};
  config.backend = "mock";
  config.devices = {"cuda:0"};
  EXPECT_TRUE(mentions(config_error([&] { canopy::engine lm{config}; }), "cuda:0"));
}

} // namespace
