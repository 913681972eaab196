// LoRA adapters through the production wiring, on mock backends whose rows under an
// adapter are their own (mock_adapted): queries under two adapters and the base model
// never share a row, KV or a computation, while equal queries under one adapter still
// merge and build on each other's KV; an unknown adapter is refused by name; removing
// one drops its entries and answers its waiting queries, and a later loading of the
// name is never served from the old one's cache; a worker that joins later loads every
// adapter before its first pass; a refusal or the adapters' budget leaves it nowhere.

#include "pipeline_fixture.hpp"

#include <canopy/messages/adapter_key.hpp>

#include <chrono>
#include <string>

using namespace std::chrono_literals;
using canopy::backends::lora_adapter_files;
using canopy::cache::token_seq;
using canopy::messages::errc;
namespace actors = canopy::actors;
namespace msg = canopy::messages;

namespace {

const lora_adapter_files files_a{"a-dir", "{\"r\": 4}", "the weights of a"};
const lora_adapter_files files_b{"b-dir", "{\"r\": 4}", "the weights of b"};

struct adapter_scopes_test : canopy::testing::pipeline_fixture {
  std::uint64_t next_serial = 1;

  /// The engine's add_adapter: every worker loads it, then the cache names it.
  caf::expected<bool> load(const std::string& name, const lora_adapter_files& files) {
    const auto key = msg::adapter_key(name, next_serial++);
    auto loaded =
        request_and_run<bool>(actors.batcher, msg::adapter_atom::value, key, files);
    if (!loaded)
      return loaded;
    return request_and_run<bool>(actors.cache, msg::adapter_atom::value, name, key);
  }

  /// The engine's remove_adapter.
  void unload(const std::string& name) {
    auto key = request_and_run<std::string>(actors.cache, msg::adapter_atom::value, name);
    ASSERT_TRUE(key) << msg::message_of(key.error());
    ASSERT_TRUE(request_and_run<bool>(actors.batcher, msg::adapter_atom::value, *key));
  }

  static msg::query under(std::string adapter, token_seq tokens) {
    msg::query q;
    q.tokens = std::move(tokens);
    q.adapter = std::move(adapter);
    return q;
  }

  /// True when the reply is exactly the mock's row for `tokens` under `files`.
  bool matches(std::size_t index, const lora_adapter_files* files,
               const token_seq& tokens) const {
    const auto& r = replies.at(index);
    if (!r || !*r)
      return false;
    const auto options = files ? canopy::backends::mock_adapted(mock, *files) : mock;
    const auto expected =
        canopy::backends::mock_logprobs(options, tokens.data(), tokens.size());
    std::vector<float> got((*r)->row->vocab());
    (*r)->row->decode(got.data());
    return got == expected;
  }

  std::string error_message(std::size_t index) const {
    const auto& r = replies.at(index);
    return r && !*r ? msg::message_of(r->error()) : std::string();
  }

  /// Lets the batch window (if any) pass and runs everything.
  void settle() {
    sched.run();
    sched.clock().advance_time(1000ms);
    sched.run();
  }
};

TEST_F(adapter_scopes_test,
       two_adapters_and_the_base_never_share_but_each_merges_within) {
  config.flush_when_idle = false;
  config.batch_timeout_ms = 1000;
  start();
  ASSERT_TRUE(load("a", files_a));
  ASSERT_TRUE(load("b", files_b));
  const token_seq short_seq{1, 2, 3}, long_seq{1, 2, 3, 4};
  struct asked {
    std::size_t index;
    const lora_adapter_files* files;
    token_seq tokens;
  };
  std::vector<asked> all;
  for (const auto& [name, files] :
       {std::pair<std::string, const lora_adapter_files*>{"", nullptr},
        {"a", &files_a},
        {"b", &files_b}}) {
    all.push_back({ask(under(name, short_seq)), files, short_seq});
    all.push_back({ask(under(name, long_seq)), files, long_seq});
    all.push_back({ask(under(name, long_seq)), files, long_seq}); // a duplicate
  }
  settle();
  for (const auto& a : all)
    EXPECT_TRUE(matches(a.index, a.files, a.tokens)) << "reply " << a.index;
  EXPECT_EQ(actors.metrics->merged_duplicates.load(), 3u) << "one per adapter";
  ASSERT_EQ(probes->passes, 1);
  std::vector<canopy::backends::pass_item> items;
  {
    std::lock_guard<std::mutex> lock(probes->mutex);
    items = probes->requests.at(0).items;
  }
  ASSERT_EQ(items.size(), 3u) << "the short sequence folds into the long one's item, "
                                 "within each adapter only";
  std::set<std::string> adapters;
  for (const auto& item : items)
    adapters.insert(std::string(msg::adapter_name_of(item.adapter)));
  EXPECT_EQ(adapters, (std::set<std::string>{"", "a", "b"}));

  // Hits stay within each adapter, and a longer sequence under a builds on a's KV (the
  // mock refuses KV made under another adapter, and its row would differ).
  const auto hit = ask(under("b", long_seq));
  const token_seq longer{1, 2, 3, 4, 5};
  const auto extended = ask(under("a", longer));
  settle();
  EXPECT_TRUE(matches(hit, &files_b, long_seq));
  EXPECT_TRUE(matches(extended, &files_a, longer));
  ASSERT_EQ(probes->passes, 2);
  std::lock_guard<std::mutex> lock(probes->mutex);
  const auto& continued = probes->requests.at(1).items.at(0);
  EXPECT_EQ(continued.prefix_length, 4u) << "a's KV of its four tokens was reused";
  EXPECT_EQ(continued.tokens, (token_seq{5}));
}

TEST_F(adapter_scopes_test, an_unknown_adapter_is_refused_by_name_and_serving_goes_on) {
  start();
  ASSERT_TRUE(load("a", files_a));
  const auto unknown = ask(under("nope", {1, 2}));
  const auto known = ask(under("a", {1, 2}));
  settle();
  EXPECT_EQ(error_of(unknown), errc::unknown_adapter);
  EXPECT_NE(error_message(unknown).find("no adapter 'nope' is loaded (loaded: a)"),
            std::string::npos)
      << error_message(unknown);
  EXPECT_TRUE(matches(known, &files_a, {1, 2}));
  const auto too_long =
      ask(under(std::string(msg::max_adapter_name_bytes + 1, 'x'), {1}));
  msg::query with_nul = under("", {1});
  with_nul.partition = std::string("a\0b", 3);
  const auto nul = ask(with_nul);
  settle();
  EXPECT_EQ(error_of(too_long), errc::invalid_request);
  EXPECT_EQ(error_of(nul), errc::invalid_request)
      << "NUL separates partition and adapter";
}

TEST_F(adapter_scopes_test, removal_drops_entries_and_a_new_loading_starts_afresh) {
  start();
  ASSERT_TRUE(load("a", files_a));
  ask(under("", {1, 2, 3}));
  ask(under("a", {1, 2, 3}));
  settle();
  const auto rows_before = actors.metrics->snapshot().logprob_entries;
  EXPECT_EQ(rows_before, 6u) << "three rows under each";
  unload("a");
  EXPECT_EQ(actors.metrics->snapshot().logprob_entries, 3u)
      << "a's rows went, the base's stay";
  EXPECT_EQ(probes->adapters, 0) << "the worker unloaded it";
  const auto gone = ask(under("a", {1, 2, 3}));
  settle();
  EXPECT_EQ(error_of(gone), errc::unknown_adapter);
  EXPECT_FALSE(request_and_run<std::string>(actors.cache, msg::adapter_atom::value,
                                            std::string("a")))
      << "removing it twice";

  // The same name with other weights: its rows, never the old cache's.
  ASSERT_TRUE(load("a", files_b));
  const auto again = ask(under("a", {1, 2, 3}));
  settle();
  EXPECT_TRUE(matches(again, &files_b, {1, 2, 3}));
}

TEST_F(adapter_scopes_test, queries_waiting_for_a_removed_adapter_get_unknown_adapter) {
  config.flush_when_idle = true;
  start();
  ASSERT_TRUE(load("a", files_a));
  const auto running = ask(under("a", {1, 2}));
  ASSERT_TRUE(run_until_pass_queued());
  const auto waiting = ask(under("a", {3, 4}));
  const auto base = ask(under("", {3, 4}));
  run_all_but_worker();
  // The removal, as the engine makes it, while the first pass is still queued.
  sys.spawn(
      [batcher = actors.batcher, cache = actors.cache](caf::event_based_actor* self) {
        self->request(cache, caf::infinite, msg::adapter_atom::value, std::string("a"))
            .then([=](std::string& key) {
              self->request(batcher, caf::infinite, msg::adapter_atom::value, key);
            });
      });
  run_all_but_worker(); // the removal is done before the worker runs the first pass
  settle();
  EXPECT_TRUE(matches(running, &files_a, {1, 2})) << "its pass was sent before";
  EXPECT_EQ(error_of(waiting), errc::unknown_adapter);
  EXPECT_NE(error_message(waiting).find("'a' was removed"), std::string::npos)
      << error_message(waiting);
  EXPECT_TRUE(matches(base, nullptr, {3, 4})) << "the base model's query is unaffected";
}

TEST_F(adapter_scopes_test, a_worker_that_joins_later_loads_every_adapter_first) {
  start();
  ASSERT_TRUE(load("a", files_a));
  ASSERT_EQ(probes->adapters, 1);
  auto c = config;
  c.devices = {"cpu"};
  std::vector<std::unique_ptr<canopy::backends::backend_i>> backends;
  backends.push_back(std::make_unique<canopy::testing::probe_backend>(mock, probes));
  auto late = actors::spawn_local_workers(sys, c, std::move(backends),
                                          actors::worker_threads::scheduled)
                  .front();
  ASSERT_TRUE(request_and_run<canopy::cache::worker_id>(
      actors.batcher, msg::join_atom::value, late.handle, late.description));
  EXPECT_EQ(probes->adapters, 2);
  caf::anon_send_exit(actors.workers.at(0), caf::exit_reason::kill);
  sched.run();
  const auto answered = ask(under("a", {4, 5}));
  settle();
  EXPECT_TRUE(matches(answered, &files_a, {4, 5})) << "the late worker computed it";
}

TEST_F(adapter_scopes_test, a_refused_or_oversized_adapter_is_loaded_nowhere) {
  config.adapter_budget_bytes = files_a.bytes() + files_b.bytes() - 1;
  start(2);
  probes->refuse_adapters = true;
  auto refused = load("a", files_a);
  ASSERT_FALSE(refused);
  EXPECT_EQ(msg::code_of(refused.error()), errc::invalid_request);
  EXPECT_NE(msg::message_of(refused.error()).find("adapter 'a': injected refusal"),
            std::string::npos)
      << msg::message_of(refused.error());
  probes->refuse_adapters = false;
  ASSERT_TRUE(load("a", files_a)) << "the refused loading left nothing behind";
  EXPECT_EQ(probes->adapters, 2) << "on both workers";
  auto over = load("b", files_b);
  ASSERT_FALSE(over);
  EXPECT_NE(msg::message_of(over.error()).find("adapter_budget_bytes"), std::string::npos)
      << msg::message_of(over.error());
  EXPECT_EQ(probes->adapters, 2);
  const auto unknown = ask(under("b", {1}));
  settle();
  EXPECT_EQ(error_of(unknown), errc::unknown_adapter);
}

} // namespace
