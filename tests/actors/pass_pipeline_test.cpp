// Passes a worker actor and a worker node's device run as a pipeline, on the
// deterministic scheduler with a backend whose passes finish on the device later
// (deferred_backend): the pass behind one starts before that one finishes, answers keep
// the order the passes started, a failure to finish reaches only its pass, a refused
// pass is answered at once, a pass done at start is answered at once (the CPU path);
// on a node, a pass whose session ends while it computes frees its KV and answers
// worker_lost, and a draining device answers its started passes before it stops.

#include "deferred_backend.hpp"
#include "deterministic_system.hpp"

#include <canopy/actors/node_device_actor.hpp>
#include <canopy/actors/worker_actor.hpp>
#include <canopy/messages/errors.hpp>

#include <caf/send.hpp>

#include <utility>
#include <vector>

namespace {

using namespace canopy;
using namespace canopy::messages;
using canopy::testing::deferred_backend;
using canopy::testing::deferred_script;

constexpr std::uint64_t owner_key = 0x5eed;
constexpr std::uint64_t session = 7;

struct pass_pipeline_test : canopy::testing::deterministic_system {
  backends::mock_options mock;
  std::shared_ptr<deferred_script> script = std::make_shared<deferred_script>();
  std::vector<std::pair<int, caf::expected<computed_pass>>> answers; // as they came

  pass_pipeline_test() {
    mock.vocab_size = 16;
    mock.context_length = 64;
  }

  std::shared_ptr<std::unique_ptr<backends::backend_i>> backend() {
    return std::make_shared<std::unique_ptr<backends::backend_i>>(
        std::make_unique<deferred_backend>(mock, script));
  }

  /// A caller that asks `dest` once; its answer lands in `answers` as `index`. Callers
  /// spawned before one sched.run() reach the actor's mailbox together, in order.
  template <class Dest, class... Ts> void ask(int index, const Dest& dest, Ts... xs) {
    sys.spawn([this, index, dest, xs...](caf::event_based_actor* self) {
      self->request(dest, caf::infinite, xs...)
          .then([this, index](computed_pass& p) { answers.emplace_back(index, p); },
                [this, index](caf::error& e) { answers.emplace_back(index, e); });
    });
  }

  static backends::pass_request pass_of(cache::token_seq tokens) {
    backends::pass_item item;
    item.tokens = std::move(tokens);
    item.rows = {static_cast<std::uint32_t>(item.tokens.size() - 1)};
    return backends::pass_request{{std::move(item)}};
  }

  std::vector<float> rows_after(const cache::token_seq& tokens) const {
    return backends::mock_logprobs(mock, tokens.data(), tokens.size());
  }

  std::vector<int> answer_order() const {
    std::vector<int> order;
    for (const auto& [index, answer] : answers)
      order.push_back(index);
    return order;
  }
};

struct worker_pipeline_test : pass_pipeline_test {
  worker_actor worker = sys.spawn(actors::worker, backend());

  ~worker_pipeline_test() override {
    caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
    sched.run();
  }

  void ask_pass(int index, cache::token_seq tokens) {
    ask(index, worker, run_atom::value, pass_of(std::move(tokens)),
        cache::row_dtype::float32);
  }
};

TEST_F(worker_pipeline_test, the_pass_behind_one_starts_before_it_finishes_in_order) {
  ask_pass(0, {1, 2});
  ask_pass(1, {3, 4, 5});
  sched.run();
  EXPECT_EQ(script->log,
            (std::vector<std::string>{"start 0", "start 1", "finish 0", "finish 1"}));
  ASSERT_EQ(answer_order(), (std::vector<int>{0, 1}));
  ASSERT_TRUE(answers[0].second && answers[1].second);
  EXPECT_EQ(answers[0].second->items.at(0).values, rows_after({1, 2}));
  EXPECT_EQ(answers[1].second->items.at(0).values, rows_after({3, 4, 5}));
}

TEST_F(worker_pipeline_test, a_pass_done_when_it_started_is_answered_before_the_next) {
  script->ready_after = 1; // as a CPU pass, computed by start
  ask_pass(0, {1, 2});
  ask_pass(1, {3});
  sched.run();
  EXPECT_EQ(script->log,
            (std::vector<std::string>{"start 0", "finish 0", "start 1", "finish 1"}));
  EXPECT_EQ(answer_order(), (std::vector<int>{0, 1}));
}

TEST_F(worker_pipeline_test, a_failure_to_finish_reaches_its_pass_alone) {
  script->failing = {0};
  ask_pass(0, {1, 2});
  ask_pass(1, {3});
  sched.run();
  ASSERT_EQ(answer_order(), (std::vector<int>{0, 1}));
  ASSERT_FALSE(answers[0].second);
  EXPECT_EQ(code_of(answers[0].second.error()), errc::backend_failure);
  EXPECT_NE(message_of(answers[0].second.error()).find("pass 0 failed on the device"),
            std::string::npos)
      << message_of(answers[0].second.error());
  ASSERT_TRUE(answers[1].second) << "the worker keeps serving";
  EXPECT_EQ(answers[1].second->items.at(0).values, rows_after({3}));
}

TEST_F(worker_pipeline_test, a_refused_pass_is_answered_at_once_the_started_in_order) {
  script->refused = {1};
  ask_pass(0, {1, 2});
  ask_pass(1, {3});
  ask_pass(2, {4});
  sched.run();
  ASSERT_EQ(answer_order(), (std::vector<int>{1, 0, 2}));
  ASSERT_FALSE(answers[0].second);
  EXPECT_EQ(code_of(answers[0].second.error()), errc::backend_failure);
  EXPECT_NE(message_of(answers[0].second.error()).find("pass 1 refused"),
            std::string::npos);
  EXPECT_TRUE(answers[1].second && answers[2].second);
}

struct device_pipeline_test : pass_pipeline_test {
  node_device_actor device = sys.spawn(actors::node_device, backend(), owner_key);

  device_pipeline_test() {
    EXPECT_TRUE(request_and_run<std::uint64_t>(device, session_atom::value, owner_key,
                                               session, true));
  }
  ~device_pipeline_test() override {
    caf::anon_send_exit(device, caf::exit_reason::user_shutdown);
    sched.run();
  }
};

TEST_F(device_pipeline_test, a_pass_whose_session_ends_as_it_computes_frees_its_kv) {
  ask(0, device, run_atom::value, session, pass_of({1, 2}), cache::row_dtype::float32);
  sys.spawn([this](caf::event_based_actor* self) {
    self->send(device, session_atom::value, owner_key, session, false);
  });
  sched.run();
  ASSERT_EQ(answer_order(), (std::vector<int>{0}));
  EXPECT_EQ(script->log, (std::vector<std::string>{"start 0", "finish 0"}));
  ASSERT_FALSE(answers[0].second) << "its KV handles are no session's";
  EXPECT_EQ(code_of(answers[0].second.error()), errc::worker_lost);
  EXPECT_EQ(script->kv_entries, 0u) << "the two entries it made were given back";
}

TEST_F(device_pipeline_test, a_draining_device_answers_its_started_passes_first) {
  ask(0, device, run_atom::value, session, pass_of({1, 2}), cache::row_dtype::float32);
  sys.spawn([this](caf::event_based_actor* self) {
    self->send(device, drain_atom::value, owner_key);
  });
  sched.run();
  ASSERT_EQ(answer_order(), (std::vector<int>{0}));
  ASSERT_TRUE(answers[0].second) << message_of(answers[0].second.error());
  EXPECT_EQ(answers[0].second->items.at(0).values, rows_after({1, 2}));
}

} // namespace
