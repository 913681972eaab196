// Workers coming and going, on the deterministic scheduler with the production wiring:
// a worker lost under a pass has its queries answered by the others (worker_lost only
// when none is left), a draining worker finishes its own passes and takes no new one,
// workers join late or come back to their slot with no KV, a worker serving another
// model is refused with both sides named, each worker's KV stays under its own budget,
// and the per-worker figures count all of it.

#include "pipeline_fixture.hpp"

#include <canopy/actors/batcher_actor.hpp>
#include <canopy/backends/model_fingerprint.hpp>

#include <caf/send.hpp>

#include <optional>

using canopy::cache::token_seq;
using canopy::cache::worker_id;
using canopy::messages::errc;
namespace actors = canopy::actors;
namespace msg = canopy::messages;

namespace {

struct worker_membership_test : canopy::testing::pipeline_fixture {
  std::shared_ptr<canopy::testing::probe> extra_probe =
      std::make_shared<canopy::testing::probe>();
  std::optional<caf::expected<worker_id>> joined;

  /// A scheduled in-process worker beside the fixture's, with a probe of its own.
  actors::worker_binding extra_worker(const canopy::backends::mock_options& options) {
    std::vector<std::unique_ptr<canopy::backends::backend_i>> backends;
    backends.push_back(
        std::make_unique<canopy::testing::probe_backend>(options, extra_probe));
    auto c = config;
    c.devices = {"cpu"};
    return actors::spawn_local_workers(sys, c, std::move(backends),
                                       actors::worker_threads::scheduled)
        .front();
  }

  /// Asks the batcher to admit `binding`; `joined` holds the outcome once run.
  void join(const actors::worker_binding& binding) {
    joined.reset();
    sys.spawn([this, binding](caf::event_based_actor* self) {
      self->request(actors.batcher, caf::infinite, msg::join_atom::value, binding.handle,
                    binding.description)
          .then([this](worker_id w) { joined = w; },
                [this](const caf::error& e) { joined = e; });
    });
  }

  const actors::worker_metrics& figures(worker_id w) { return actors.metrics->worker(w); }

  void kill(const msg::worker_actor& worker) {
    caf::anon_send_exit(worker, caf::exit_reason::kill);
  }

  /// Worker 0 was lost with one query's pass, which worker 1 computed; every caller got
  /// its row and the figures say so.
  void expect_one_query_moved_from_worker_0_to_1() {
    EXPECT_EQ(figures(0).passes, 0u);
    EXPECT_EQ(figures(1).passes, 1u);
    EXPECT_EQ(figures(0).losses, 1u);
    EXPECT_EQ(figures(0).redispatched, 1u);
    EXPECT_EQ(figures(0).state, actors::worker_status::lost);
    EXPECT_EQ(figures(0).in_flight, 0u);
    const auto stats = actors.metrics->snapshot();
    ASSERT_EQ(stats.workers.size(), 2u);
    EXPECT_EQ(stats.workers[0].state, "lost");
    EXPECT_EQ(stats.workers[1].state, "active");
    EXPECT_EQ(stats.errors_by_code.size(), 0u) << "no caller saw an error";
  }

  /// What the batcher hears when a worker's node stops answering (a link gives up on
  /// it) while the worker itself still holds its passes: it runs them later.
  void declare_lost(worker_id w) {
    caf::anon_send(caf::actor_cast<caf::actor>(actors.batcher),
                   caf::down_msg{actors.workers.at(w).address(),
                                 caf::exit_reason::remote_link_unreachable});
  }
};

TEST_F(worker_membership_test,
       a_worker_dead_before_its_pass_arrives_is_lost_and_the_other_answers) {
  start(2);
  auto a = ask(token_seq{1, 2});
  // Step until the batcher asks the cache to prepare, let the cache answer, then kill
  // worker 0 before the batcher hears of it: the pass goes to a dead worker.
  auto* batcher =
      dynamic_cast<caf::stateful_actor<actors::batcher_state, msg::batcher_actor::base>*>(
          caf::actor_cast<caf::abstract_actor*>(actors.batcher));
  ASSERT_NE(batcher, nullptr);
  while (!batcher->state.preparing)
    ASSERT_TRUE(sched.try_run_once());
  ASSERT_TRUE(sched.prioritize(actors.cache));
  sched.run_once();
  kill(actors.workers[0]);
  ASSERT_TRUE(sched.prioritize(actors.workers[0]));
  sched.run_once();
  sched.run();
  EXPECT_TRUE(matches_reference(a, {1, 2}));
  EXPECT_EQ(probes->passes, 1) << "only the survivor ran a pass";
  expect_one_query_moved_from_worker_0_to_1();
}

TEST_F(
    worker_membership_test,
    a_worker_lost_under_a_pass_has_it_answered_by_the_other_and_its_late_answer_ignored) {
  start(2);
  auto a = ask(token_seq{1, 2, 3});
  // The pass sits in worker 0's mailbox (the least loaded, lowest id) when the
  // batcher hears the worker is lost; the worker runs it afterwards (a node that
  // stopped, then went on).
  ASSERT_TRUE(run_until_pass_queued(0));
  declare_lost(0);
  sched.run();
  EXPECT_TRUE(matches_reference(a, {1, 2, 3}));
  EXPECT_EQ(probes->passes, 2) << "the lost worker ran its pass late";
  EXPECT_EQ(actors.metrics->answered, 1u) << "answered once";
  expect_one_query_moved_from_worker_0_to_1(); // the late pass is not counted
}

TEST_F(worker_membership_test, every_query_of_a_lost_pass_is_answered_once_by_the_other) {
  config.flush_when_idle = false;
  config.batch_size = 3; // the three distinct sequences
  start(2);
  std::vector<std::size_t> asked;
  // One family (first token 1), so one worker's pass: a prefix, and a duplicate.
  std::vector<token_seq> sequences = {{1, 2}, {1, 2, 3}, {1, 5}, {1, 5}};
  for (const auto& s : sequences)
    asked.push_back(ask(s));
  sched.clock().advance_time(std::chrono::milliseconds(2)); // the batch window
  ASSERT_TRUE(run_until_pass_queued(0));
  declare_lost(0);
  sched.run();
  // {1, 5} shares the uncached token 1 with the item of {1, 2, 3}: it waited for worker
  // 0's pass, and was woken by its loss.
  sched.clock().advance_time(std::chrono::milliseconds(2));
  sched.run();
  for (std::size_t i = 0; i < asked.size(); ++i)
    EXPECT_TRUE(matches_reference(asked[i], sequences[i])) << i;
  EXPECT_EQ(figures(0).redispatched, 2u) << "two distinct entries were in the lost pass";
  EXPECT_EQ(figures(1).passes, 2u) << "the survivor computed them, then the one waiting";
  EXPECT_EQ(actors.metrics->answered, 4u);
  EXPECT_EQ(actors.metrics->failed, 0u);
}

TEST_F(worker_membership_test, only_when_no_worker_is_left_do_callers_get_worker_lost) {
  start(1);
  auto a = ask(token_seq{1, 2});
  ASSERT_TRUE(run_until_pass_queued(0));
  declare_lost(0);
  sched.run();
  EXPECT_EQ(error_of(a), errc::worker_lost);
  auto b = ask(token_seq{3});
  sched.run();
  EXPECT_EQ(error_of(b), errc::no_workers);
}

TEST_F(worker_membership_test,
       the_reference_path_moves_to_another_worker_when_its_worker_is_lost) {
  start(2);
  auto a = ask_uncached(token_seq{1, 2, 3});
  ASSERT_TRUE(run_until_pass_queued(0));
  declare_lost(0);
  sched.run();
  EXPECT_TRUE(matches_reference(a, {1, 2, 3}));
  EXPECT_EQ(probes->kv_entries, 0u) << "the reference path keeps no KV";
  EXPECT_EQ(figures(1).passes, 1u);
  EXPECT_EQ(actors.metrics->answered, 1u);
}

TEST_F(worker_membership_test, a_draining_worker_finishes_its_pass_and_takes_no_new_one) {
  start(2);
  auto a = ask(token_seq{1, 2});
  ASSERT_TRUE(run_until_pass_queued(0));
  caf::anon_send(actors.batcher, msg::drain_atom::value, worker_id{0});
  sched.run();
  EXPECT_TRUE(matches_reference(a, {1, 2}));
  EXPECT_EQ(figures(0).passes, 1u) << "the pass it held was its to finish";
  EXPECT_EQ(figures(0).state, actors::worker_status::draining);
  for (int i = 0; i < 5; ++i) {
    auto q = ask(token_seq{10 + i});
    sched.run();
    EXPECT_TRUE(matches_reference(q, {10 + i}));
  }
  EXPECT_EQ(figures(0).passes, 1u);
  EXPECT_EQ(figures(1).passes, 5u);
}

TEST_F(worker_membership_test, a_worker_holds_at_most_passes_in_flight_passes) {
  config.worker_passes_in_flight = 2;
  config.flush_when_idle = true;
  start(1);
  // The worker never runs: passes pile up in its mailbox up to the limit.
  auto a = ask(token_seq{1});
  run_all_but_worker();
  auto b = ask(token_seq{2});
  run_all_but_worker();
  auto c = ask(token_seq{3});
  run_all_but_worker();
  EXPECT_EQ(figures(0).in_flight, 2u);
  EXPECT_EQ(actors.metrics->queue_depth, 1u) << "the third waits for room";
  sched.run();
  EXPECT_TRUE(matches_reference(a, {1}));
  EXPECT_TRUE(matches_reference(b, {2}));
  EXPECT_TRUE(matches_reference(c, {3}));
  EXPECT_EQ(figures(0).passes, 3u);
  EXPECT_EQ(figures(0).in_flight, 0u);
}

TEST_F(worker_membership_test,
       an_extension_waits_for_the_busy_worker_holding_its_prefix) {
  start(2);
  // A prompt long enough to be worth waiting for (reuse_tokens), and its extensions.
  const token_seq prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  auto extended = [&](std::initializer_list<std::int32_t> more) {
    auto s = prompt;
    s.insert(s.end(), more);
    return s;
  };
  auto a = ask(prompt);
  sched.run();
  ASSERT_TRUE(matches_reference(a, prompt));
  ASSERT_EQ(figures(0).passes, 1u);
  auto b = ask(extended({20}));
  run_all_but_worker(0); // worker 0 holds b's pass
  auto c = ask(extended({21}));
  run_all_but_worker(0);
  EXPECT_EQ(figures(1).passes, 0u) << "the idle worker would compute the prompt again";
  EXPECT_EQ(actors.metrics->queue_depth, 1u) << "c waits for worker 0";
  sched.run();
  EXPECT_TRUE(matches_reference(b, extended({20})));
  EXPECT_TRUE(matches_reference(c, extended({21})));
  EXPECT_EQ(probes->tokens, 12u) << "the prompt, then one new token each";
  EXPECT_EQ(figures(0).passes, 3u);
  // A sequence no worker holds KV for goes to the one with the least work in hand.
  auto e = ask(extended({20, 22}));
  run_all_but_worker(0); // worker 0 holds e's pass
  auto d = ask(token_seq{8, 9});
  run_all_but_worker(0);
  EXPECT_TRUE(answered(d)) << "worker 1 took it while worker 0 holds e";
  sched.run();
  EXPECT_TRUE(matches_reference(d, {8, 9}));
  EXPECT_TRUE(matches_reference(e, extended({20, 22})));
  EXPECT_EQ(figures(1).passes, 1u);
}

TEST_F(worker_membership_test,
       a_branch_of_a_prompt_in_flight_waits_for_its_kv_on_a_worker_with_room) {
  config.worker_passes_in_flight = 2;
  start(1);
  const token_seq prompt = {1, 2, 3, 4, 5, 6, 7, 8};
  auto branch = [&](std::int32_t last) {
    auto s = prompt;
    s.push_back(last);
    return s;
  };
  auto first = ask(branch(20));
  run_all_but_worker(0); // the worker holds the pass computing the prompt
  auto second = ask(branch(21));
  run_all_but_worker(0);
  EXPECT_EQ(figures(0).in_flight, 1u) << "the worker has room for a second pass, but the "
                                         "branch waits for the prompt's KV";
  sched.run();
  EXPECT_TRUE(matches_reference(first, branch(20)));
  EXPECT_TRUE(matches_reference(second, branch(21)));
  EXPECT_EQ(probes->tokens, 8u + 1u + 1u) << "the prompt computed once";
}

TEST_F(worker_membership_test, a_late_worker_joins_and_serves_when_the_first_is_lost) {
  start(1);
  join(extra_worker(mock));
  sched.run();
  ASSERT_TRUE(joined && *joined);
  EXPECT_EQ(**joined, 1u);
  kill(actors.workers[0]);
  sched.run();
  auto a = ask(token_seq{7, 8, 9});
  sched.run();
  EXPECT_TRUE(matches_reference(a, {7, 8, 9}));
  EXPECT_EQ(extra_probe->passes, 1);
  const auto stats = actors.metrics->snapshot();
  ASSERT_EQ(stats.workers.size(), 2u);
  EXPECT_EQ(stats.workers[1].node, "local");
  EXPECT_EQ(stats.workers[1].passes, 1u);
}

TEST_F(worker_membership_test,
       a_worker_serving_another_model_is_refused_naming_both_sides) {
  start(1);
  auto other = mock;
  other.seed = mock.seed + 1; // same shapes, other answers: another fingerprint
  join(extra_worker(other));
  sched.run();
  ASSERT_TRUE(joined);
  ASSERT_FALSE(*joined);
  const auto text = msg::message_of(joined->error());
  EXPECT_EQ(msg::code_of(joined->error()), errc::invalid_request);
  EXPECT_NE(text.find("fingerprint " + canopy::backends::mock_fingerprint(other)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(canopy::backends::mock_fingerprint(mock)), std::string::npos)
      << text;
  auto wider = mock;
  wider.vocab_size = mock.vocab_size * 2;
  join(extra_worker(wider));
  sched.run();
  ASSERT_TRUE(joined && !*joined);
  EXPECT_NE(msg::message_of(joined->error()).find("vocabulary 128"), std::string::npos)
      << msg::message_of(joined->error());
  // A sliding window changes which KV a pass reads, so the cache must know it.
  auto windowed = mock;
  windowed.kv_window = 8;
  join(extra_worker(windowed));
  sched.run();
  ASSERT_TRUE(joined && !*joined);
  EXPECT_NE(msg::message_of(joined->error()).find("sliding window 8"), std::string::npos)
      << msg::message_of(joined->error());
  // The engine keeps serving with the worker it has.
  auto a = ask(token_seq{1, 2});
  sched.run();
  EXPECT_TRUE(matches_reference(a, {1, 2}));
  EXPECT_EQ(extra_probe->passes, 0);
}

TEST_F(worker_membership_test, a_worker_back_in_its_slot_starts_without_kv_and_serves) {
  start(2);
  auto a = ask(token_seq{1, 2, 3});
  sched.run();
  ASSERT_TRUE(matches_reference(a, {1, 2, 3}));
  ASSERT_GT(actors.metrics->worker(0).kv_bytes, 0u);
  kill(actors.workers[0]);
  sched.run();
  EXPECT_EQ(actors.metrics->worker(0).kv_bytes, 0u)
      << "the lost worker's KV is forgotten";
  auto back = extra_worker(mock);
  back.description.slot = 0;
  join(back);
  sched.run();
  ASSERT_TRUE(joined && *joined);
  EXPECT_EQ(**joined, 0u);
  EXPECT_EQ(figures(0).state, actors::worker_status::active);
  EXPECT_EQ(figures(0).losses, 1u);
  // Worker 1 takes the next pass (least loaded); then the one after goes to the worker
  // that came back, which computes its whole sequence: it holds no KV.
  kill(actors.workers[1]);
  sched.run();
  auto b = ask(token_seq{1, 2, 3, 4});
  sched.run();
  EXPECT_TRUE(matches_reference(b, {1, 2, 3, 4}));
  ASSERT_EQ(extra_probe->requests.size(), 1u);
  EXPECT_EQ(extra_probe->requests[0].items[0].prefix_length, 0u);
  EXPECT_EQ(extra_probe->tokens, 4u);
}

TEST_F(worker_membership_test, each_worker_keeps_its_kv_under_its_own_budget) {
  config.kv_budget_bytes = 40 * mock.kv_bytes_per_token;
  start(1);
  auto small = extra_worker(mock);
  small.description.kv_budget_bytes = 4 * mock.kv_bytes_per_token;
  join(small);
  sched.run();
  ASSERT_TRUE(joined && *joined);
  // Asked together, in twelve families: routing spreads them over both workers.
  std::vector<std::size_t> asked;
  for (int i = 0; i < 12; ++i)
    asked.push_back(ask(token_seq{i + 1, 2, 3, 4, 5}));
  sched.run();
  for (int i = 0; i < 12; ++i)
    EXPECT_TRUE(matches_reference(asked[i], {i + 1, 2, 3, 4, 5}));
  EXPECT_LE(figures(0).kv_bytes, config.kv_budget_bytes);
  EXPECT_LE(figures(1).kv_bytes, small.description.kv_budget_bytes);
  EXPECT_GT(figures(1).kv_bytes, 0u);
  EXPECT_EQ(figures(0).kv_budget_bytes, config.kv_budget_bytes);
  EXPECT_EQ(figures(1).kv_budget_bytes, small.description.kv_budget_bytes);
  EXPECT_GT(figures(1).passes, 0u) << "routing used both workers";
}

TEST(worker_admission, a_worker_storing_kv_in_another_format_is_refused) {
  // A lossy KV format changes a worker's answers, and the cache shares them all.
  canopy::backends::model_info served;
  served.name = "llama m";
  served.dtype = "float32";
  served.kv_dtype = "float32";
  canopy::messages::worker_description worker;
  worker.model = served;
  worker.node = "n1";
  EXPECT_EQ(canopy::actors::admission_problem(served, worker), "");
  worker.model.kv_dtype = "int8";
  const auto problem = canopy::actors::admission_problem(served, worker);
  EXPECT_NE(problem.find("KV format int8"), std::string::npos) << problem;
  EXPECT_NE(problem.find("serves float32"), std::string::npos) << problem;
}

} // namespace
