// Canopy across processes (docs/across-machines.md: "Across machines"): `canopy worker`
// processes on loopback and a front that runs no device of its own. Answers equal the
// single-process path; a worker killed, stopped or leaving loses no query and answers
// none twice; a worker that comes back takes passes again, and the front's adapters;
// a front that dies leaves no KV behind.

#include "cluster_support.hpp"
#include "http_test_client.hpp"
#include "mock_adapter.hpp"
#include "oracle.hpp"
#include "shared_fixtures.hpp"

#include <canopy/engine.hpp>

#include <csignal>
#include <future>
#include <map>
#include <mutex>
#include <regex>

using namespace canopy::testing;
using namespace std::chrono_literals;
using canopy::engine;
using canopy::engine_stats;
using canopy::token_seq;

namespace {

// 64 concurrent callers, 20,032 queries in all.
constexpr std::size_t particles = 64;
constexpr std::size_t steps = 313;

TEST(cluster, two_workers_and_a_front_answer_an_smc_workload_bit_for_bit_as_the_mock) {
  worker_process a(cluster_mock_flags), b(cluster_mock_flags);
  engine front{front_config({a.address(), b.address()})};
  workload_tally tally;
  run_smc(front, particles, steps, tally, is_mock_row);
  expect_all_answered_right(tally, particles * steps);
  const auto s = front.stats();
  ASSERT_EQ(s.workers.size(), 2u);
  for (const auto& w : s.workers) {
    EXPECT_GT(w.passes, 0u) << w.node << " took no pass";
    EXPECT_EQ(w.state, "active");
    EXPECT_GE(w.heartbeat_age_ms, 0) << "a remote worker has heartbeats";
  }
  EXPECT_GT(s.merged_duplicates + s.cache_hits, 0u) << "the workload repeats queries";
  EXPECT_EQ(s.tokens_computed, smc_unique_tokens(particles, steps, 128))
      << "each token computed once, on one of the two workers" << s.to_json();
  EXPECT_EQ(s.locked_nodes, 0u);
  EXPECT_EQ(s.in_flight, 0u);
}

TEST(cluster,
     stories260_k_through_two_workers_equals_one_process_within_the_oracle_tolerance) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/stories260K/stories260K.bin");
  CANOPY_SHARED_PATH_OR_SKIP(oracle_dir, "oracle/stories260K");
  const double tolerance = load_oracle_cases(oracle_dir).front().tolerance;
  canopy::engine_config local;
  local.model = model.string();
  const std::vector<std::string> flags = {"--model", model.string()};
  worker_process a(flags), b(flags);
  auto config = front_config({a.address(), b.address()}, local);
  engine front{config};
  engine alone{local};
  std::mutex mutex;
  std::map<token_seq, at::Tensor> reference;
  auto check = [&](const at::Tensor& row, const token_seq& tokens) {
    at::Tensor expected;
    {
      std::lock_guard<std::mutex> guard{mutex};
      auto it = reference.find(tokens);
      if (it == reference.end())
        it = reference.emplace(tokens, alone.next_token_logprobs_uncached(tokens)).first;
      expected = it->second;
    }
    return (row - expected).abs().max().item<float>() <= tolerance;
  };
  workload_tally tally;
  run_smc(front, particles, steps, tally, check);
  expect_all_answered_right(tally, particles * steps);
  const auto s = front.stats();
  EXPECT_EQ(s.tokens_computed,
            s.workers.at(0).tokens_computed + s.workers.at(1).tokens_computed);
}

TEST(cluster, a_front_with_no_device_serves_every_oracle_case_through_remote_workers) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/stories260K/stories260K.bin");
  CANOPY_SHARED_PATH_OR_SKIP(oracle_dir, "oracle/stories260K");
  worker_process w({"--model", model.string()});
  canopy::engine_config config;
  config.model = model.string(); // read for the vocabulary, context and tokenizer only
  engine front{front_config({w.address()}, config)};
  EXPECT_TRUE(front.has_tokenizer());
  EXPECT_EQ(front.tokenize("Once upon a time").front(), 1);
  for (const auto& c : load_oracle_cases(oracle_dir))
    for (std::int64_t r = 0; r < c.rows; ++r) {
      const token_seq prefix(c.tokens.begin(), c.tokens.begin() + r + 1);
      const auto row = front.next_token_logprobs_sync(prefix);
      const at::Tensor expected =
          at::from_blob(const_cast<float*>(c.row(r)), {c.vocab}, at::kFloat);
      EXPECT_LE((row - expected).abs().max().item<float>(), c.tolerance)
          << c.name << " row " << r;
    }
  EXPECT_EQ(front.stats().workers.at(0).node, w.address());
}

TEST(cluster, a_worker_killed_mid_run_loses_no_query) {
  const auto slow = flags_with({"--mock_cost_per_token_us", "100"});
  worker_process a(slow);
  auto b = std::make_unique<worker_process>(slow);
  const auto killed = b->address();
  engine front{front_config({a.address(), killed})};
  workload_tally tally;
  std::thread run([&] { run_smc(front, particles, steps, tally, is_mock_row); });
  while (tally.answered < particles * steps / 3)
    std::this_thread::sleep_for(1ms);
  b->signal(SIGKILL);
  run.join();
  expect_all_answered_right(tally, particles * steps);
  const auto s = front.stats();
  EXPECT_EQ(worker_on(s, killed)->state, "lost");
  EXPECT_EQ(worker_on(s, killed)->losses, 1u);
  EXPECT_EQ(worker_on(s, killed)->in_flight, 0u);
  EXPECT_EQ(s.locked_nodes, 0u);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.queue_depth, 0u);
  for (const auto& [code, n] : s.errors_by_code)
    ADD_FAILURE() << n << " queries failed with " << code;
}

/// Queries asked through callbacks, each counting its answers: a query answered twice
/// would show.
struct counted_queries {
  std::vector<token_seq> sequences;
  std::vector<std::atomic<int>> answers;
  std::atomic<int> wrong{0}, errors{0};

  explicit counted_queries(std::size_t n) : answers(n) {
    for (std::size_t i = 0; i < n; ++i)
      sequences.push_back(
          {3, 1, static_cast<std::int32_t>(i % 128), static_cast<std::int32_t>(i / 128)});
  }
  void ask_all(engine& lm) {
    for (std::size_t i = 0; i < sequences.size(); ++i)
      lm.next_token_logprobs(sequences[i], [this, i](canopy::logprobs_result r) {
        if (auto* row = std::get_if<at::Tensor>(&r)) {
          if (!is_mock_row(*row, sequences[i]))
            ++wrong;
        } else {
          ++errors;
        }
        ++answers[i];
      });
  }
  bool all_answered() const {
    return std::all_of(answers.begin(), answers.end(),
                       [](const auto& n) { return n.load() >= 1; });
  }
  int most_answers() const {
    int most = 0;
    for (const auto& n : answers)
      most = std::max(most, n.load());
    return most;
  }
};

TEST(cluster,
     a_stopped_worker_is_lost_within_worker_timeout_and_answers_nothing_twice_after) {
  // Passes of 64 new tokens take ~130 ms, so the stop catches some in flight.
  const auto slow = flags_with({"--mock_cost_per_token_us", "2000"});
  worker_process a(slow), b(slow);
  auto config = front_config({a.address(), b.address()});
  engine front{config};
  counted_queries queries(2000);
  queries.ask_all(front);
  ASSERT_TRUE(eventually(front, [&](const engine_stats& s) {
    return worker_on(s, b.address())->in_flight > 0;
  }));
  const auto stopped = std::chrono::steady_clock::now();
  b.signal(SIGSTOP);
  ASSERT_TRUE(eventually(front, [&](const engine_stats& s) {
    return worker_on(s, b.address())->state == "lost";
  }));
  const auto detection = std::chrono::steady_clock::now() - stopped;
  std::cout << "[cluster] a stopped worker was lost after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(detection).count()
            << " ms (worker_timeout_ms " << config.worker_timeout_ms << ")\n";
  // Lost within 0.7 of the timeout (Note [loss detection]); the bound allows for the
  // polling above and the scheduler's slack on a loaded machine.
  EXPECT_LE(detection,
            std::chrono::milliseconds(static_cast<int>(config.worker_timeout_ms)) +
                300ms);
  const auto s = front.stats();
  EXPECT_GT(worker_on(s, b.address())->redispatched_queries, 0u);
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!queries.all_answered() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(queries.all_answered());
  EXPECT_EQ(queries.errors, 0) << "worker_lost while another worker lives";
  EXPECT_EQ(queries.wrong, 0);
  // Woken, the worker finishes the passes it held and its node is admitted again:
  // none of those late answers reaches a caller a second time.
  b.signal(SIGCONT);
  ASSERT_TRUE(eventually(front, [&](const engine_stats& s) {
    return node_at(s, b.address())->admissions == 2 &&
           node_at(s, b.address())->state == "admitted";
  }));
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(queries.most_answers(), 1);
  EXPECT_EQ(front.stats().locked_nodes, 0u);
}

TEST(cluster, a_restarted_worker_is_admitted_again_on_its_port_and_takes_passes) {
  worker_process a(cluster_mock_flags);
  auto b = std::make_unique<worker_process>(cluster_mock_flags);
  const auto address = b->address();
  const auto port = std::to_string(b->port());
  engine front{front_config({a.address(), address})};
  b->signal(SIGKILL);
  b->wait(5s);
  ASSERT_TRUE(eventually(front, [&](const engine_stats& s) {
    return worker_on(s, address)->state == "lost";
  }));
  b = std::make_unique<worker_process>(flags_with({"--listen", "127.0.0.1:" + port}));
  ASSERT_TRUE(eventually(front, [&](const engine_stats& s) {
    return node_at(s, address)->admissions == 2 &&
           worker_on(s, address)->state == "active";
  }));
  const auto before = worker_on(front.stats(), address)->passes;
  a.signal(SIGKILL); // only the restarted worker is left to take passes
  ASSERT_TRUE(eventually(front, [&](const engine_stats& s) {
    return worker_on(s, a.address())->state == "lost";
  }));
  for (std::int32_t t = 0; t < 20; ++t) {
    const token_seq tokens = {5, t, 9};
    EXPECT_TRUE(is_mock_row(front.next_token_logprobs_sync(tokens), tokens));
  }
  const auto s = front.stats();
  EXPECT_GT(worker_on(s, address)->passes, before);
  EXPECT_EQ(worker_on(s, address)->kv_budget_bytes,
            canopy::engine_config{}.kv_budget_bytes);
}

// A front's LoRA adapters travel to its worker nodes as bytes: loaded at start
// (config.adapters) and while running (add_adapter), and again on a node that restarts,
// before its first pass; each row is the adapted mock's (mock_adapted over the
// directory's files), the base's stay the mock's, and a removed adapter is unknown.
TEST(cluster, adapters_reach_worker_nodes_and_a_node_that_restarts) {
  scratch_dir a, b;
  write_mock_adapter(a, "weights of a");
  write_mock_adapter(b, "weights of b");
  auto node = std::make_unique<worker_process>(cluster_mock_flags);
  const auto address = node->address();
  const auto port = std::to_string(node->port());
  auto config = front_config({address});
  config.adapters = {"a=" + a.path().string()};
  engine front{config};
  const auto adapted_as = [&](const scratch_dir& dir, const token_seq& tokens) {
    const auto expected = mock_adapted_row(cluster_mock_config(), dir, tokens);
    canopy::query_options under;
    under.adapter = &dir == &a ? "a" : "b";
    const auto row = front.next_token_logprobs_sync(tokens, under);
    return row.numel() == static_cast<std::int64_t>(expected.size()) &&
           std::memcmp(row.data_ptr<float>(), expected.data(),
                       expected.size() * sizeof(float)) == 0;
  };
  EXPECT_TRUE(adapted_as(a, {5, 1, 9}));
  EXPECT_TRUE(is_mock_row(front.next_token_logprobs_sync({5, 1, 9}), {5, 1, 9}));
  front.add_adapter("b", b.path().string());
  EXPECT_TRUE(adapted_as(b, {5, 2, 9}));

  node->signal(SIGKILL);
  node->wait(5s);
  ASSERT_TRUE(eventually(front, [&](const engine_stats& s) {
    return worker_on(s, address)->state == "lost";
  }));
  node = std::make_unique<worker_process>(flags_with({"--listen", "127.0.0.1:" + port}));
  ASSERT_TRUE(eventually(front, [&](const engine_stats& s) {
    return worker_on(s, address)->state == "active";
  }));
  // New sequences: nothing cached, each computed on the restarted node.
  EXPECT_TRUE(adapted_as(a, {5, 3, 9}));
  EXPECT_TRUE(adapted_as(b, {5, 4, 9}));

  front.remove_adapter("a");
  canopy::query_options removed;
  removed.adapter = "a";
  try {
    front.next_token_logprobs_sync({5, 5, 9}, removed);
    ADD_FAILURE() << "a removed adapter answered";
  } catch (const canopy::error& e) {
    EXPECT_EQ(e.code(), canopy::errc::unknown_adapter) << e.what();
  }
  EXPECT_TRUE(adapted_as(b, {5, 6, 9}));
}

// A front whose only node is lost holds its queries for worker_timeout_ms: a node back
// within it (here restarted on its port) answers them; they failed at once before.
TEST(cluster, queries_wait_for_a_lost_node_that_comes_back_within_the_timeout) {
  auto node = std::make_unique<worker_process>(cluster_mock_flags);
  const auto address = node->address();
  const auto port = std::to_string(node->port());
  auto config = front_config({address});
  config.worker_timeout_ms = 8000;
  engine front{config};
  ASSERT_TRUE(eventually(front, [&](const engine_stats& s) {
    return worker_on(s, address) && worker_on(s, address)->state == "active";
  }));
  node->signal(SIGKILL);
  node->wait(5s);
  ASSERT_TRUE(eventually(front, [&](const engine_stats& s) {
    return worker_on(s, address)->state == "lost";
  }));
  const token_seq tokens = {5, 6, 7};
  auto waiting = front.next_token_logprobs(tokens);
  std::this_thread::sleep_for(300ms);
  node = std::make_unique<worker_process>(flags_with({"--listen", "127.0.0.1:" + port}));
  ASSERT_EQ(waiting.wait_for(15s), std::future_status::ready);
  EXPECT_TRUE(is_mock_row(waiting.get(), tokens));
}

TEST(cluster, sigterm_finishes_the_pass_in_flight_and_exits_0) {
  const auto slow = flags_with({"--mock_cost_per_pass_us", "400000"});
  worker_process a(slow), b(slow);
  engine front{front_config({a.address(), b.address()})};
  auto first = front.next_token_logprobs(token_seq{4, 4, 4});
  std::string leaving;
  ASSERT_TRUE(eventually(front, [&](const engine_stats& s) {
    for (const auto& w : s.workers)
      if (w.in_flight == 1)
        leaving = w.node;
    return !leaving.empty();
  }));
  auto& process = leaving == a.address() ? a : b;
  process.signal(SIGTERM);
  EXPECT_EQ(process.wait(20s), 0) << process.err();
  const auto row = first.get();
  EXPECT_TRUE(is_mock_row(row, {4, 4, 4}));
  const auto s = front.stats();
  EXPECT_EQ(worker_on(s, leaving)->passes, 1u) << "the leaving worker finished its pass";
  EXPECT_EQ(worker_on(s, leaving)->redispatched_queries, 0u);
  EXPECT_NE(process.err().find("finishing the passes it holds"), std::string::npos)
      << process.err();
  const token_seq next = {4, 4, 5};
  EXPECT_TRUE(is_mock_row(front.next_token_logprobs_sync(next), next));
}

TEST(cluster, a_front_that_dies_leaves_no_kv_on_its_workers) {
  worker_process w(cluster_mock_flags);
  {
    serve_process front(
        flags_with({"--workers", "0", "--remote_workers", "[\"" + w.address() + "\"]"}));
    const auto reply =
        exchange(front.port(), make_request("POST", "/v1/logprobs",
                                            R"({"batch": [[1, 2, 3, 4], [1, 2, 5]]})",
                                            "Content-Type: application/json\r\n"));
    ASSERT_EQ(reply.status, 200) << reply.body;
    const auto model = exchange(front.port(), make_request("GET", "/v1/model"));
    EXPECT_NE(model.body.find("\"devices\":[\"" + w.address() + "/cpu\"]"),
              std::string::npos)
        << model.body;
    front.signal(SIGKILL);
    front.wait(5s);
  }
  const std::regex freed("ended \\(.*\\): freed ([0-9]+) KV entries");
  std::smatch m;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  std::string log;
  while (std::chrono::steady_clock::now() < deadline) {
    log = w.err();
    if (std::regex_search(log, m, freed))
      break;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(std::regex_search(log, m, freed)) << log;
  EXPECT_EQ(std::stoi(m[1]), 5) << "the KV of tokens 1 2 3 4 and 5, all the front made";
}

} // namespace
