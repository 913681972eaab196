// Who a front admits and who a worker node answers (docs/across-machines.md: "Across
// machines"): a node serving another model, one without the front's cluster token, one of
// another protocol are refused by name while the front keeps serving with the others; a
// front of another protocol gets nothing from a node; TLS between nodes works and a front
// without it is not let in; strangers who reach a node's port (silent, noise, the wrong
// transport) and a TLS front's failed handshakes with one node disturb no admitted
// front; a node listening beyond loopback without a token refuses to start. Before the
// cluster token is proved, a node reads 64 bytes of a peer at most and none reaches
// CAF: a BASP header claiming 4 GiB costs it nothing, a stranger speaking CAF finds no
// actor, and a peer that never answers the challenge is dropped in time. Past the gate,
// a peer with the token can neither kill the gate nor end another front's session.
// Refusals name models by file, never by path; a node on [::1] says so in brackets.

#include "cluster_support.hpp"
#include "http_test_client.hpp"
#include "scratch_files.hpp"
#include "shared_fixtures.hpp"

#include <canopy/actor_system_setup.hpp>
#include <canopy/actors/cluster_middleman.hpp>
#include <canopy/backends/model_fingerprint.hpp>
#include <canopy/messages/errors.hpp>
#include <canopy/messages/node_messages.hpp>

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <cstdlib>
#include <fstream>
#include <netinet/in.h>
#include <optional>
#include <set>
#include <sys/socket.h>
#include <unistd.h>

using namespace canopy::testing;
using namespace std::chrono_literals;
using canopy::engine;
using canopy::engine_stats;
using canopy::token_seq;
namespace msg = canopy::messages;

namespace {

/// Asks a few queries: the front serves with the workers it admitted.
void expect_serving(engine& front) {
  for (std::int32_t t = 0; t < 5; ++t) {
    const token_seq tokens = {2, t};
    EXPECT_TRUE(is_mock_row(front.next_token_logprobs_sync(tokens), tokens));
  }
}

/// The refused node's last error, once it is refused.
std::string refusal_of(engine& front, const std::string& address) {
  EXPECT_TRUE(eventually(
      front,
      [&](const engine_stats& s) { return node_at(s, address)->state == "refused"; }))
      << "state " << node_at(front.stats(), address)->state << ": "
      << node_at(front.stats(), address)->last_error;
  return node_at(front.stats(), address)->last_error;
}

std::string token_file(const scratch_dir& dir, const std::string& name,
                       const std::string& secret) {
  const auto path = dir.path() / name;
  write_bytes(path, secret + "\n");
  return path.string();
}

TEST(cluster_admission,
     a_node_serving_another_model_is_refused_naming_both_fingerprints) {
  worker_process good(cluster_mock_flags);
  worker_process other(flags_with({"--mock_seed", "7"}));
  engine front{front_config({good.address(), other.address()})};
  const auto why = refusal_of(front, other.address());
  auto mine = canopy::actors::backend_spec_for(cluster_mock_config(), "cpu").mock;
  auto theirs = mine;
  theirs.seed = 7;
  EXPECT_NE(why.find("fingerprint " + canopy::backends::mock_fingerprint(theirs)),
            std::string::npos)
      << why;
  EXPECT_NE(why.find(canopy::backends::mock_fingerprint(mine)), std::string::npos) << why;
  EXPECT_NE(why.find(other.address()), std::string::npos) << why;
  expect_serving(front);
  EXPECT_EQ(front.stats().workers.size(), 1u) << "only the good node's device joined";
}

TEST(cluster_admission, refusals_name_models_by_file_never_by_where_they_live) {
  CANOPY_SHARED_PATH_OR_SKIP(stories, "models/stories260K/stories260K.bin");
  CANOPY_SHARED_PATH_OR_SKIP(aidreams, "models/aidreams260K/aidreams260K.bin");
  worker_process node({"--model", stories.string()});
  auto config = front_config({node.address()}, canopy::engine_config{});
  config.model = aidreams.string();
  engine front{config};
  const auto why = refusal_of(front, node.address());
  EXPECT_NE(why.find("(llama stories260K.bin)"), std::string::npos) << why;
  EXPECT_NE(why.find("(llama aidreams260K.bin)"), std::string::npos) << why;
  EXPECT_EQ(why.find(stories.parent_path().string()), std::string::npos) << why;
  try {
    front.next_token_logprobs_sync({1, 2});
    ADD_FAILURE() << "a front with no admitted worker answered";
  } catch (const canopy::error& e) {
    EXPECT_EQ(std::string(e.what()).find(aidreams.parent_path().string()),
              std::string::npos)
        << e.what();
  }
}

TEST(cluster_admission,
     a_node_with_another_vocabulary_is_refused_even_by_a_front_with_no_fingerprint) {
  worker_process wider(
      {"--backend", "mock", "--vocab_size", "256", "--context_length", "256"});
  worker_process good(cluster_mock_flags);
  engine front{front_config({wider.address(), good.address()})};
  const auto why = refusal_of(front, wider.address());
  EXPECT_NE(why.find("vocabulary 256"), std::string::npos) << why;
  EXPECT_NE(why.find("this engine serves 128"), std::string::npos) << why;
  expect_serving(front);
}

TEST(cluster_admission,
     tokens_that_differ_are_refused_and_the_secret_never_helps_a_stranger) {
  scratch_dir dir;
  const auto ours = token_file(dir, "ours", "correct horse battery staple");
  const auto theirs = token_file(dir, "theirs", "another secret");
  worker_process good(flags_with({"--cluster_token_file", ours}));
  worker_process wrong(flags_with({"--cluster_token_file", theirs}));
  worker_process open_node(cluster_mock_flags);
  auto config = front_config({good.address(), wrong.address(), open_node.address()});
  config.cluster_token_file = ours;
  engine front{config};
  EXPECT_NE(refusal_of(front, wrong.address()).find("could not prove the cluster token"),
            std::string::npos);
  EXPECT_NE(refusal_of(front, open_node.address()).find("has no cluster token"),
            std::string::npos);
  expect_serving(front);
  EXPECT_EQ(front.stats().workers.size(), 1u);
  // A front without a token gets nothing from a node that has one.
  engine stranger{front_config({good.address()})};
  EXPECT_NE(refusal_of(stranger, good.address()).find("requires a cluster token"),
            std::string::npos);
  EXPECT_THROW(stranger.next_token_logprobs_sync({1}), canopy::error);
}

TEST(cluster_admission, a_node_of_another_protocol_is_refused_naming_both_versions) {
  canopy_process fake({"999"}, "fake worker node: listening on ",
                      CANOPY_FAKE_WORKER_NODE);
  worker_process good(cluster_mock_flags);
  engine front{front_config({fake.address(), good.address()})};
  const auto why = refusal_of(front, fake.address());
  EXPECT_NE(why.find("protocol mismatch: this front speaks protocol " +
                     std::to_string(msg::protocol_version) + ", the node at " +
                     fake.address() + " speaks 999"),
            std::string::npos)
      << why;
  expect_serving(front);
}

TEST(cluster_admission, a_front_of_another_protocol_gets_nothing_from_a_node) {
  worker_process node(cluster_mock_flags);
  canopy::engine_config config = front_config({node.address()});
  caf::actor_system_config system_config;
  canopy::configure_actor_system(system_config, config, canopy::network_role::front);
  caf::actor_system system{system_config};
  // Through the cluster gate (no token, as the node has none), as a front connects.
  auto middleman = canopy::actors::spawn_cluster_middleman(system, {});
  caf::scoped_actor self{system};
  std::optional<msg::node_gate_actor> gate;
  self->request(middleman, 5s, caf::connect_atom::value, std::string("127.0.0.1"),
                node.port())
      .receive(
          [&](const caf::node_id&, caf::strong_actor_ptr& ptr,
              const std::set<std::string>&) {
            gate = caf::actor_cast<msg::node_gate_actor>(ptr);
          },
          [&](const caf::error& e) { ADD_FAILURE() << system.render(e); });
  ASSERT_TRUE(gate);
  auto link = caf::actor_cast<msg::worker_link_actor>(self);
  std::string refused;
  self->request(*gate, 5s, msg::hello_atom::value,
                msg::node_hello{999, std::vector<std::uint8_t>(32, 3), link})
      .receive([](const msg::node_challenge&) {},
               [&](const caf::error& e) { refused = msg::message_of(e); });
  EXPECT_EQ(refused,
            "protocol mismatch: the front speaks protocol 999, this worker node " +
                std::to_string(msg::protocol_version));
  // Nor does anything but a hello get an answer of substance.
  self->request(*gate, 5s, msg::auth_atom::value, std::vector<std::uint8_t>(32, 0))
      .receive(
          [](const msg::node_announcement&) {
            ADD_FAILURE() << "admitted without a hello";
          },
          [&](const caf::error& e) { refused = msg::message_of(e); });
  EXPECT_NE(refused.find("unauthorized"), std::string::npos) << refused;
  self->request(*gate, 5s, msg::ping_atom::value, std::uint64_t{42})
      .receive([](bool) { ADD_FAILURE() << "a made-up session answered"; },
               [&](const caf::error& e) { refused = msg::message_of(e); });
  EXPECT_NE(refused.find("no such session"), std::string::npos) << refused;
  caf::anon_send_exit(middleman, caf::exit_reason::kill); // it ignores the others
}

/// A CA and a certificate it signed, made with the openssl command (installed by
/// scripts/install-deps.sh).
struct test_certificates {
  scratch_dir dir;
  std::string ca, cert, key;

  test_certificates() {
    const auto at = [&](const char* name) { return (dir.path() / name).string(); };
    ca = at("ca.pem");
    cert = at("node.pem");
    key = at("node.key");
    const std::string quiet = " > /dev/null 2>&1";
    const std::vector<std::string> commands = {
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout " + at("ca.key") + " -out " +
            ca + " -days 2 -subj /CN=canopy-test-ca",
        "openssl req -newkey rsa:2048 -nodes -keyout " + key + " -out " + at("node.csr") +
            " -subj /CN=canopy-node",
        "openssl x509 -req -in " + at("node.csr") + " -CA " + ca + " -CAkey " +
            at("ca.key") + " -CAcreateserial -out " + cert + " -days 2"};
    for (const auto& c : commands)
      if (std::system((c + quiet).c_str()) != 0)
        throw std::runtime_error("failed (is openssl installed?): " + c);
  }
  std::vector<std::string> flags() const {
    return {"--tls_cert", cert, "--tls_key", key, "--tls_ca", ca};
  }
};

/// A node's flags for TLS with the cluster secret in `secret_file`.
std::vector<std::string> tls_node_flags(const test_certificates& certs,
                                        const std::string& secret_file) {
  auto flags = flags_with(certs.flags());
  flags.insert(flags.end(), {"--cluster_token_file", secret_file});
  return flags;
}

/// A front of `nodes` over TLS with the cluster secret in `secret_file`.
canopy::engine_config tls_front_config(const std::vector<std::string>& nodes,
                                       const test_certificates& certs,
                                       const std::string& secret_file) {
  auto config = front_config(nodes);
  config.tls_cert = certs.cert;
  config.tls_key = certs.key;
  config.tls_ca = certs.ca;
  config.cluster_token_file = secret_file;
  return config;
}

TEST(cluster_admission, tls_between_nodes_serves_and_a_front_without_it_is_not_let_in) {
  test_certificates certs;
  scratch_dir dir;
  const auto secret = token_file(dir, "token", "tls and a token");
  worker_process node(tls_node_flags(certs, secret));
  {
    engine front{tls_front_config({node.address()}, certs, secret)};
    ASSERT_TRUE(eventually(front, [&](const engine_stats& s) {
      return node_at(s, node.address())->state == "admitted";
    })) << node_at(front.stats(), node.address())->last_error;
    expect_serving(front);
  }
  auto plain = front_config({node.address()});
  plain.cluster_token_file = secret;
  engine outsider{plain};
  EXPECT_FALSE(eventually(
      outsider,
      [&](const engine_stats& s) {
        return node_at(s, node.address())->state == "admitted";
      },
      1500ms));
  EXPECT_TRUE(outsider.stats().workers.empty());
  EXPECT_EQ(node.stop(5s), 0) << node.err(); // SIGTERM: drains and exits
}

/// What anyone who reaches a node's port can do without its secret, many times: connect
/// and say nothing, send noise (deterministic), send a BASP-looking header that claims a
/// huge payload; each connection closed at once.
void strangers_knock(std::uint16_t port) {
  std::string noise(4096, '\0');
  std::uint32_t state = 12345;
  for (auto& c : noise) {
    state = state * 1664525u + 1013904223u;
    c = static_cast<char>(state >> 24);
  }
  std::string huge_header(24, '\0');
  huge_header[3] = '\x7f';
  for (int i = 0; i < 10; ++i) {
    test_client silent(port);
    test_client noisy(port);
    noisy.send(noise);
    test_client claims(port);
    claims.send(huge_header);
  }
}

/// The front still has its first session with the node at `address`: admitted once,
/// never lost, and serving.
void expect_undisturbed(engine& front, const std::string& address) {
  const auto stats = front.stats(); // node_at points into it
  const auto* node = node_at(stats, address);
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->state, "admitted") << node->last_error;
  EXPECT_EQ(node->admissions, 1u) << node->last_error;
  EXPECT_EQ(node->losses, 0u) << node->last_error;
  expect_serving(front);
}

TEST(cluster_admission, strangers_at_a_nodes_port_disturb_no_admitted_front) {
  worker_process node(cluster_mock_flags);
  engine front{front_config({node.address()})};
  ASSERT_TRUE(eventually(front, [&](const engine_stats& s) {
    return node_at(s, node.address())->state == "admitted";
  }));
  strangers_knock(node.port());
  // Long enough for heartbeats (every 200 ms) to cross every connection many times.
  std::this_thread::sleep_for(2s);
  expect_undisturbed(front, node.address());
}

// OpenSSL keeps errors per thread, and CAF 0.17.6's TLS sessions never empty that queue
// (their logging, compiled out in Debian's build, is what would): one failed handshake
// made the next would-block read of any other TLS connection on the thread look fatal.
TEST(cluster_admission, failed_tls_handshakes_disturb_no_other_tls_connection) {
  test_certificates certs;
  scratch_dir dir;
  const auto secret = token_file(dir, "token", "tls and a token");
  worker_process tls_node(tls_node_flags(certs, secret));
  worker_process plain_node(flags_with({"--cluster_token_file", secret}));
  // The front's handshakes with the plain node fail, again at every retry.
  engine front{
      tls_front_config({tls_node.address(), plain_node.address()}, certs, secret)};
  ASSERT_TRUE(eventually(front, [&](const engine_stats& s) {
    return node_at(s, tls_node.address())->state == "admitted";
  })) << node_at(front.stats(), tls_node.address())->last_error;
  // The TLS node's handshakes with strangers fail too.
  strangers_knock(tls_node.port());
  std::this_thread::sleep_for(3s); // the plain node is retried meanwhile
  expect_undisturbed(front, tls_node.address());
  EXPECT_NE(node_at(front.stats(), plain_node.address())->state, "admitted");
}

TEST(cluster_admission, a_node_on_ipv6_loopback_names_itself_in_brackets_and_serves) {
  const int probe = ::socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 loopback{};
  loopback.sin6_family = AF_INET6;
  loopback.sin6_addr = in6addr_loopback;
  const bool ipv6 = probe >= 0 && ::bind(probe, reinterpret_cast<sockaddr*>(&loopback),
                                         sizeof loopback) == 0;
  if (probe >= 0)
    ::close(probe);
  if (!ipv6)
    GTEST_SKIP() << "no IPv6 loopback on this machine";
  // The marker holds the brackets: without them the node is never seen listening.
  canopy_process node(worker_args(flags_with({"--listen", "[::1]:0"})),
                      "canopy worker: listening on [::1]:");
  engine front{front_config({"[::1]:" + std::to_string(node.port())})};
  expect_serving(front);
}

TEST(cluster_admission, a_node_beyond_loopback_without_a_token_refuses_to_start) {
  const auto r = run_canopy(worker_args(flags_with({"--listen", "0.0.0.0:0"})));
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_NE(r.err.find("needs cluster_token_file"), std::string::npos) << describe(r);
}

/// The resident memory of process `pid`, in bytes (VmRSS).
std::size_t resident_bytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stoull(line.substr(6)) * 1024;
  return 0;
}

/// A front with the token file `secret` serves through the node at `address`.
void expect_serving_with_token(const std::string& address, const std::string& secret) {
  auto config = front_config({address});
  config.cluster_token_file = secret;
  engine front{config};
  expect_serving(front);
}

/// Reads the node's challenge on `peer`: the gate's magic, then more.
std::string challenge_of(test_client& peer) {
  std::string got;
  for (int i = 0; i < 20 && got.size() < 48; ++i)
    got = peer.unread_within(100ms);
  EXPECT_EQ(got.size(), 48u);
  EXPECT_EQ(got.substr(0, 13), "canopy-gate/1") << "the node speaks first, and only this";
  return got;
}

TEST(cluster_admission,
     a_basp_header_claiming_4_gib_never_reaches_basp_and_costs_the_node_nothing) {
  scratch_dir dir;
  const auto secret = token_file(dir, "token", "a secret");
  worker_process node(flags_with({"--cluster_token_file", secret}));
  const auto before = resident_bytes(node.pid());
  // CAF 0.17's BASP header: payload_len (bytes 4..7) sizes the next read; 0xFFFFFFFF
  // made a node allocate 4 GiB before any check. Here it is the gate's 64-byte answer.
  std::string header(64, '\0');
  header[0] = 1; // client_handshake
  for (int i = 4; i < 8; ++i)
    header[static_cast<std::size_t>(i)] = '\xff';
  for (int i = 0; i < 6; ++i) {
    test_client stranger(node.port());
    challenge_of(stranger);
    ASSERT_TRUE(stranger.send(header));
    EXPECT_TRUE(stranger.closed_within(3s)) << "a wrong proof ends the connection";
  }
  EXPECT_LT(resident_bytes(node.pid()), before + (16u << 20))
      << "from " << before << " bytes";
  expect_serving_with_token(node.address(), secret);
}

TEST(cluster_admission, a_stranger_speaking_caf_finds_no_actor_to_message_or_kill) {
  scratch_dir dir;
  const auto secret = token_file(dir, "token", "a secret");
  worker_process node(flags_with({"--cluster_token_file", secret}));
  {
    // CAF's own middleman, as a stranger's small CAF program connects: it would get the
    // gate's handle and could send it exit_msg{kill}, which no CAF actor survives.
    canopy::engine_config config = front_config({node.address()});
    caf::actor_system_config system_config;
    canopy::configure_actor_system(system_config, config, canopy::network_role::front);
    caf::actor_system system{system_config};
    auto gate =
        system.middleman().remote_actor<msg::node_gate_actor>("127.0.0.1", node.port());
    EXPECT_FALSE(gate) << "a stranger got the gate's handle";
  }
  expect_serving_with_token(node.address(), secret);
}

TEST(cluster_admission,
     a_peer_that_never_answers_the_challenge_is_dropped_within_the_timeout) {
  worker_process node(flags_with({"--worker_timeout_ms", "500"}));
  test_client silent(node.port());
  challenge_of(silent);
  const auto started = std::chrono::steady_clock::now();
  EXPECT_TRUE(silent.closed_within(5s));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s)
      << "500 ms to answer, checked every 125 ms";
}

TEST(cluster_admission,
     a_peer_with_the_token_can_neither_kill_the_gate_nor_end_a_session) {
  scratch_dir dir;
  const auto secret = token_file(dir, "token", "a secret");
  worker_process node(flags_with({"--cluster_token_file", secret}));
  auto config = front_config({node.address()});
  config.cluster_token_file = secret;
  engine front{config};
  ASSERT_TRUE(eventually(front, [&](const engine_stats& s) {
    return node_at(s, node.address())->state == "admitted";
  }));
  {
    // Past the token's gate, as any cluster member gets: the published handle.
    caf::actor_system_config system_config;
    canopy::configure_actor_system(system_config, config, canopy::network_role::front);
    caf::actor_system system{system_config};
    canopy::actors::gate_settings settings;
    settings.secret = "a secret";
    auto middleman = canopy::actors::spawn_cluster_middleman(system, settings);
    caf::scoped_actor self{system};
    caf::actor gate;
    self->request(middleman, 5s, caf::connect_atom::value, std::string("127.0.0.1"),
                  node.port())
        .receive(
            [&](const caf::node_id&, caf::strong_actor_ptr& ptr,
                const std::set<std::string>&) {
              gate = caf::actor_cast<caf::actor>(ptr);
            },
            [&](const caf::error& e) { ADD_FAILURE() << system.render(e); });
    ASSERT_TRUE(gate);
    // exit_msg{kill} ends any CAF actor before its handlers run; a forged down_msg would
    // end the session of the link it names.
    caf::anon_send_exit(gate, caf::exit_reason::kill);
    self->send_exit(gate, caf::exit_reason::kill);
    caf::anon_send(gate, caf::down_msg{caf::actor_cast<caf::actor_addr>(self),
                                       caf::exit_reason::kill});
    std::this_thread::sleep_for(500ms);
    caf::anon_send_exit(middleman, caf::exit_reason::kill);
  }
  std::this_thread::sleep_for(1s); // heartbeats every 200 ms
  expect_undisturbed(front, node.address());
  expect_serving_with_token(node.address(), secret);
}

} // namespace
