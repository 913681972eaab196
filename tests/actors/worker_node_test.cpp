// A worker node's actors on the deterministic scheduler, as a stranger and as fronts
// would use them: a device serves open sessions only, lets a pass build only on its
// own session's KV and frees exactly that KV when the session ends; owner-only
// messages need the node's key; a session's LoRA adapters are its own (two sessions
// may load different files under one key) and go with it; the gate admits a front that
// proves the secret, refuses one that does not, replaces a link's session when it comes
// back, and keeps a flood of hellos bounded.

#include "deterministic_system.hpp"
#include "probe_backend.hpp"

#include <canopy/actors/cluster_auth.hpp>
#include <canopy/actors/node_device_actor.hpp>
#include <canopy/actors/node_gate_actor.hpp>
#include <canopy/messages/errors.hpp>

#include <caf/event_based_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <optional>

namespace {

using namespace canopy;
using namespace canopy::messages;
using canopy::actors::auth_bytes;
using canopy::actors::auth_role;

constexpr std::uint64_t owner_key = 0x5eed;

struct worker_node_test : canopy::testing::deterministic_system {
  std::shared_ptr<canopy::testing::probe> probe =
      std::make_shared<canopy::testing::probe>();
  backends::mock_options mock;
  node_device_actor device;

  worker_node_test() {
    mock.vocab_size = 16;
    mock.context_length = 64;
    auto holder = std::make_shared<std::unique_ptr<backends::backend_i>>(
        std::make_unique<canopy::testing::probe_backend>(mock, probe));
    device = sys.spawn(actors::node_device, holder, owner_key);
  }
  ~worker_node_test() override {
    caf::anon_send_exit(device, caf::exit_reason::user_shutdown);
    sched.run();
  }

  caf::expected<computed_pass> run(std::uint64_t session, backends::pass_item item) {
    return request_and_run<computed_pass>(device, run_atom::value, session,
                                          backends::pass_request{{std::move(item)}},
                                          cache::row_dtype::float32);
  }

  static backends::pass_item item(cache::token_seq tokens,
                                  cache::kv_handle prefix = cache::no_kv,
                                  std::uint32_t prefix_length = 0) {
    backends::pass_item i;
    i.tokens = std::move(tokens);
    i.rows = {static_cast<std::uint32_t>(i.tokens.size() - 1)};
    i.prefix = prefix;
    i.prefix_length = prefix_length;
    return i;
  }
};

std::string message_or(const caf::expected<computed_pass>& r) {
  return r ? std::string("a pass") : message_of(r.error());
}

TEST_F(worker_node_test,
       a_device_serves_open_sessions_only_and_each_builds_on_its_own_kv) {
  EXPECT_EQ(code_of(run(7, item({1, 2})).error()), errc::worker_lost)
      << "no session is open";
  ASSERT_TRUE(request_and_run<std::uint64_t>(device, session_atom::value, owner_key,
                                             std::uint64_t{7}, true));
  ASSERT_TRUE(request_and_run<std::uint64_t>(device, session_atom::value, owner_key,
                                             std::uint64_t{8}, true));
  auto first = run(7, item({1, 2}));
  ASSERT_TRUE(first) << message_or(first);
  const auto kv = first->items.at(0).kv;
  ASSERT_EQ(kv.size(), 2u);
  auto other = run(8, item({3}, kv[1], 2));
  ASSERT_FALSE(other);
  EXPECT_NE(message_of(other.error()).find("does not hold"), std::string::npos)
      << "session 8 cannot read session 7's KV";
  auto own = run(7, item({3}, kv[1], 2));
  EXPECT_TRUE(own) << message_or(own);
  // Another session cannot free it either.
  caf::anon_send(device, free_kv_atom::value, std::uint64_t{8}, kv);
  sched.run();
  EXPECT_EQ(probe->kv_entries, 3u);
  // Closing session 7 frees exactly its three entries.
  auto freed = request_and_run<std::uint64_t>(device, session_atom::value, owner_key,
                                              std::uint64_t{7}, false);
  ASSERT_TRUE(freed);
  EXPECT_EQ(*freed, 3u);
  EXPECT_EQ(probe->kv_entries, 0u);
  EXPECT_EQ(code_of(run(7, item({1})).error()), errc::worker_lost) << "the session ended";
}

TEST_F(worker_node_test, each_session_has_its_own_adapters_and_they_go_with_it) {
  for (std::uint64_t s : {7u, 8u})
    ASSERT_TRUE(
        request_and_run<std::uint64_t>(device, session_atom::value, owner_key, s, true));
  const backends::lora_adapter_files seven{"seven", "{}", "7"}, eight{"eight", "{}", "8"};
  const std::string key = "tuned#1"; // both fronts' first loading of "tuned"
  ASSERT_TRUE(
      request_and_run<bool>(device, adapter_atom::value, std::uint64_t{7}, key, seven));
  auto under = [&](std::uint64_t session) {
    auto i = item({1, 2});
    i.adapter = key;
    return run(session, i);
  };
  auto refused = under(8);
  ASSERT_FALSE(refused);
  EXPECT_NE(message_of(refused.error()).find("did not load"), std::string::npos);
  ASSERT_TRUE(
      request_and_run<bool>(device, adapter_atom::value, std::uint64_t{8}, key, eight));
  EXPECT_EQ(probe->adapters, 2);
  for (const auto& [session, files] : {std::pair{std::uint64_t{7}, seven}, {8, eight}}) {
    auto pass = under(session);
    ASSERT_TRUE(pass) << message_or(pass);
    const cache::token_seq tokens{1, 2};
    EXPECT_EQ(pass->items.at(0).values,
              backends::mock_logprobs(backends::mock_adapted(mock, files), tokens.data(),
                                      tokens.size()))
        << "session " << session << " gets the rows of its own adapter";
  }
  ASSERT_TRUE(request_and_run<std::uint64_t>(device, session_atom::value, owner_key,
                                             std::uint64_t{7}, false));
  EXPECT_EQ(probe->adapters, 1) << "session 7's adapter went with it";
  caf::anon_send(device, adapter_atom::value, std::uint64_t{8}, key);
  sched.run();
  EXPECT_EQ(probe->adapters, 0);
  EXPECT_FALSE(under(8)) << "unloaded";
}

TEST_F(worker_node_test, owner_only_messages_need_the_nodes_key) {
  auto opened = request_and_run<std::uint64_t>(device, session_atom::value,
                                               std::uint64_t{1}, std::uint64_t{9}, true);
  ASSERT_FALSE(opened);
  EXPECT_EQ(code_of(run(9, item({1})).error()), errc::worker_lost);
  caf::anon_send(device, drain_atom::value, std::uint64_t{1});
  sched.run();
  ASSERT_TRUE(request_and_run<std::uint64_t>(device, session_atom::value, owner_key,
                                             std::uint64_t{9}, true))
      << "a drain without the key stops nothing";
  EXPECT_TRUE(run(9, item({1})));
}

struct gate_test : worker_node_test {
  node_gate_actor gate;
  std::vector<std::string> log;

  void start_gate(std::string secret) {
    actors::gate_options o;
    o.secret = std::move(secret);
    o.owner_key = owner_key;
    o.log = [this](const std::string& line) { log.push_back(line); };
    device_announcement d;
    d.handle = device;
    d.device = "cpu";
    o.devices = {d};
    gate = sys.spawn(actors::node_gate, o);
    sched.run();
  }
  ~gate_test() override {
    caf::anon_send_exit(gate, caf::exit_reason::user_shutdown);
    sched.run();
  }

  struct front {
    caf::actor self; // the front's link: stays up until killed
    std::optional<caf::expected<node_announcement>> outcome;
    auth_bytes front_nonce, node_nonce;
  };

  /// A front's link running the handshake with `secret` (again, when it ran one
  /// before); `f.outcome` holds the announcement or the refusal once run.
  void handshake(front& f, const std::string& secret) {
    f.outcome.reset();
    f.front_nonce = actors::fresh_nonce();
    if (!f.self)
      f.self = sys.spawn([this, &f](caf::event_based_actor* self) -> caf::behavior {
        return {[this, &f, self](const std::string& secret) {
          self->request(gate, caf::infinite, hello_atom::value,
                        node_hello{protocol_version, f.front_nonce,
                                   caf::actor_cast<worker_link_actor>(self)})
              .then(
                  [this, &f, self, secret](node_challenge& c) {
                    f.node_nonce = c.nonce;
                    const auto proof = secret.empty()
                                           ? auth_bytes{}
                                           : actors::auth_proof(secret, auth_role::front,
                                                                f.front_nonce, c.nonce);
                    self->request(gate, caf::infinite, auth_atom::value, proof)
                        .then([&f](node_announcement& a) { f.outcome = std::move(a); },
                              [&f](caf::error& e) { f.outcome = std::move(e); });
                  },
                  [&f](caf::error& e) { f.outcome = std::move(e); });
        }};
      });
    caf::anon_send(f.self, secret);
    sched.run();
  }

  std::uint64_t session_of(const front& f, const std::string& secret) const {
    return actors::session_token(secret, f.front_nonce, f.node_nonce);
  }
};

TEST_F(gate_test, a_front_that_proves_the_secret_gets_the_devices_and_a_session) {
  start_gate("shared secret");
  front f;
  handshake(f, "shared secret");
  ASSERT_TRUE(f.outcome && *f.outcome)
      << (f.outcome ? message_of(f.outcome->error()) : "no answer");
  const auto& a = **f.outcome;
  EXPECT_EQ(a.session, 0u) << "with a secret, the token never crosses the wire";
  ASSERT_EQ(a.devices.size(), 1u);
  EXPECT_EQ(a.devices[0].handle, device);
  const auto session = session_of(f, "shared secret");
  EXPECT_TRUE(run(session, item({1, 2, 3})));
  EXPECT_TRUE(request_and_run<bool>(gate, ping_atom::value, session));
  EXPECT_EQ(code_of(request_and_run<bool>(gate, ping_atom::value, session + 1).error()),
            errc::worker_lost);
  // The link goes down: its session ends and its KV is freed.
  caf::anon_send_exit(f.self, caf::exit_reason::kill);
  sched.run();
  EXPECT_EQ(probe->kv_entries, 0u);
  EXPECT_EQ(code_of(run(session, item({1})).error()), errc::worker_lost);
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log.back().find("freed 3 KV entries"), std::string::npos) << log.back();
}

TEST_F(gate_test, a_front_without_the_secret_is_refused_and_gets_nothing) {
  start_gate("shared secret");
  front f;
  handshake(f, "a guess");
  ASSERT_TRUE(f.outcome);
  ASSERT_FALSE(*f.outcome);
  EXPECT_NE(message_of(f.outcome->error()).find("could not prove the cluster token"),
            std::string::npos);
  EXPECT_EQ(code_of(run(session_of(f, "a guess"), item({1})).error()), errc::worker_lost);
  caf::anon_send_exit(f.self, caf::exit_reason::kill);
}

TEST_F(gate_test, a_link_that_comes_back_replaces_its_session_and_its_old_kv_is_freed) {
  start_gate("");
  front f;
  handshake(f, "");
  ASSERT_TRUE(f.outcome && *f.outcome);
  const auto old_session = (*f.outcome)->session;
  ASSERT_NE(old_session, 0u) << "without a secret the node sends the token";
  ASSERT_TRUE(run(old_session, item({1, 2})));
  EXPECT_EQ(probe->kv_entries, 2u);
  // The same link runs the handshake again (its node was thought lost).
  handshake(f, "");
  ASSERT_TRUE(f.outcome && *f.outcome);
  const auto new_session = (*f.outcome)->session;
  EXPECT_NE(new_session, old_session);
  EXPECT_EQ(probe->kv_entries, 0u) << "the old session's KV went with it";
  EXPECT_EQ(code_of(run(old_session, item({1})).error()), errc::worker_lost);
  EXPECT_TRUE(run(new_session, item({1})));
  caf::anon_send_exit(f.self, caf::exit_reason::kill);
}

TEST_F(gate_test,
       a_flood_of_hellos_keeps_a_bounded_number_and_owner_messages_need_the_key) {
  start_gate("shared secret");
  std::vector<caf::actor> strangers;
  for (std::size_t i = 0; i < actors::max_pending_challenges + 10; ++i)
    strangers.push_back(sys.spawn([this](caf::event_based_actor* self) -> caf::behavior {
      self->request(gate, caf::infinite, hello_atom::value,
                    node_hello{protocol_version, auth_bytes(32, 1),
                               caf::actor_cast<worker_link_actor>(self)})
          .then([](const node_challenge&) {}, [](const caf::error&) {});
      return {[](leave_atom) { return true; }};
    }));
  sched.run();
  auto* gate_actor =
      dynamic_cast<caf::stateful_actor<actors::node_gate_state, node_gate_actor::base>*>(
          caf::actor_cast<caf::abstract_actor*>(gate));
  ASSERT_NE(gate_actor, nullptr);
  EXPECT_EQ(gate_actor->state.challenges.size(), actors::max_pending_challenges);
  EXPECT_EQ(gate_actor->state.challenge_order.size(), actors::max_pending_challenges);
  // A front still gets in.
  front f;
  handshake(f, "shared secret");
  EXPECT_TRUE(f.outcome && *f.outcome);
  EXPECT_FALSE(request_and_run<bool>(gate, drain_atom::value, std::uint64_t{1}))
      << "not the owner";
  EXPECT_FALSE(gate_actor->state.draining);
  for (auto& s : strangers)
    caf::anon_send_exit(s, caf::exit_reason::kill);
  caf::anon_send_exit(f.self, caf::exit_reason::kill);
}

} // namespace
