// `canopy bench --target`: the HTTP load generator run as a user runs it, against a
// real `canopy serve --backend mock` started for the test, against a stand-in server
// whose every answer fails, and against nothing at all. No timing is asserted: speed
// is for benchmarks, not tests.

#include "canopy_process.hpp"
#include "cli_runner.hpp"
#include "shared_fixtures.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

namespace {

using canopy::testing::cli_result;
using canopy::testing::describe;
using canopy::testing::run_canopy;
using canopy::testing::unique_temp_path;
using namespace std::chrono_literals;

/// `canopy serve --port 0 ARGS...` for the scope, and its URL.
struct running_server {
  canopy::testing::serve_process process;
  std::string url = "http://127.0.0.1:" + std::to_string(process.port());
  explicit running_server(std::vector<std::string> args) : process(std::move(args)) {}
};

/// A loopback TCP socket bound to a free port, listening or not; closed at scope exit.
struct loopback_socket {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  std::uint16_t port = 0;

  loopback_socket() {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), size) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0)
      port = ntohs(address.sin_port);
  }
  ~loopback_socket() { ::close(fd); }
  loopback_socket(const loopback_socket&) = delete;
  loopback_socket& operator=(const loopback_socket&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
};

/// A stand-in server that describes a model and refuses every log-prob request with a
/// 503, on keep-alive connections, one thread per connection.
class refusing_server {
public:
  refusing_server() {
    ::listen(socket_.fd, 16);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~refusing_server() {
    stopping_ = true;
    acceptor_.join();
    for (auto& t : connections_)
      t.join();
  }
  refusing_server(const refusing_server&) = delete;
  refusing_server& operator=(const refusing_server&) = delete;

  std::string url() const { return socket_.url(); }

private:
  void accept_loop() {
    while (!stopping_) {
      pollfd ready{socket_.fd, POLLIN, 0};
      if (::poll(&ready, 1, 20) == 1)
        if (const int fd = ::accept(socket_.fd, nullptr, nullptr); fd >= 0)
          connections_.emplace_back([fd] { serve(fd); });
    }
  }
  /// Answers requests until the client closes the connection.
  static void serve(int fd) {
    std::string in;
    char chunk[4096];
    for (;;) {
      const auto head_end = in.find("\r\n\r\n");
      if (head_end == std::string::npos) {
        const auto got = ::recv(fd, chunk, sizeof chunk, 0);
        if (got <= 0)
          break;
        in.append(chunk, static_cast<std::size_t>(got));
        continue;
      }
      std::size_t length = 0;
      if (const auto at = in.find("Content-Length: "); at < head_end)
        length = std::stoul(in.substr(at + 16));
      if (in.size() < head_end + 4 + length) {
        const auto got = ::recv(fd, chunk, sizeof chunk, 0);
        if (got <= 0)
          break;
        in.append(chunk, static_cast<std::size_t>(got));
        continue;
      }
      const bool model = in.rfind("GET /v1/model ", 0) == 0;
      in.erase(0, head_end + 4 + length);
      const std::string body =
          model ? R"({"name":"stand-in","vocab_size":512,"context_length":256})"
                : R"({"error":{"code":"no_workers","message":"refused by the test"}})";
      const std::string answer =
          std::string("HTTP/1.1 ") + (model ? "200 OK" : "503 Service Unavailable") +
          "\r\nContent-Type: application/json\r\nContent-Length: " +
          std::to_string(body.size()) + "\r\n\r\n" + body;
      if (::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL) < 0)
        break;
    }
    ::close(fd);
  }

  loopback_socket socket_;
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> connections_; // used by the acceptor thread, then joined
  std::thread acceptor_;
};

nlohmann::json parse_json(const cli_result& r) {
  try {
    return nlohmann::json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not JSON: " << e.what() << '\n' << describe(r);
    return {};
  }
}

/// One mock server for the suite: starting the program takes most of a second.
class http_load_on_mock : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    try {
      server_ = new running_server({"--backend", "mock"});
    } catch (const std::exception& e) {
      problem_ = e.what();
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr) << problem_; }

  static running_server* server_;
  static std::string problem_;
};

running_server* http_load_on_mock::server_ = nullptr;
std::string http_load_on_mock::problem_;

TEST_F(http_load_on_mock, measures_every_combination) {
  auto& server = *server_;
  const auto r = run_canopy({"bench", "--target", server.url, "--duration_s", "0.3",
                             "--connections", "1,8", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const auto doc = parse_json(r);
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc.at("target"), server.url);
  EXPECT_EQ(doc.at("errors"), 0);
  const std::size_t vocab = doc.at("model").at("vocab_size");
  const std::size_t length = doc.at("options").at("sequence_length");

  std::set<std::tuple<std::string, std::string, int>> seen;
  for (const auto& row : doc.at("results")) {
    const std::string name = row.at("workload").get<std::string>() + "/" +
                             row.at("payload").get<std::string>() + "/" +
                             row.at("connections").dump();
    seen.emplace(row.at("workload").get<std::string>(),
                 row.at("payload").get<std::string>(), row.at("connections").get<int>());
    EXPECT_GT(row.at("requests"), 0) << name;
    EXPECT_EQ(row.at("errors"), 0) << name << ": " << row.at("error_kinds").dump();
    EXPECT_GT(row.at("requests_per_second"), 0.0) << name;
    EXPECT_GT(row.at("latency_us").at("p50"), 0.0) << name;
    EXPECT_GE(row.at("latency_us").at("p99"), row.at("latency_us").at("p50")) << name;
    EXPECT_TRUE(row.at("server_overhead_us").at("p50").is_number()) << name;
    EXPECT_TRUE(row.at("server_overhead_us").at("p99").is_number()) << name;
    EXPECT_TRUE(row.at("engine_us").at("p50").is_number()) << name;
    EXPECT_GT(row.at("response_bytes_per_request"), row.at("body_bytes_per_request"))
        << name;
  }
  std::set<std::tuple<std::string, std::string, int>> expected;
  for (const char* w : {"hits", "misses"})
    for (const char* p : {"json", "binary"})
      for (int n : {1, 8})
        expected.emplace(w, p, n);
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(doc.at("results").size(), expected.size());

  // The binary body of one row: header, sequence length, the tokens sent, the values.
  const auto& sizes = doc.at("row_bytes");
  EXPECT_EQ(sizes.at("binary_float32"), double(32 + 4 + 4 * length + 4 * vocab));
  EXPECT_GT(sizes.at("json"), double(vocab)); // at least a character per value

  const auto& targets = doc.at("targets");
  ASSERT_EQ(targets.size(), 2u) << targets.dump();
  for (const auto& t : targets) {
    EXPECT_TRUE(t.at("ran").get<bool>()) << t.dump();
    EXPECT_TRUE(t.at("measured").is_number()) << t.dump();
  }
}

TEST_F(http_load_on_mock, table_names_the_row_sizes_and_targets) {
  const auto& server = *server_;
  const auto r = run_canopy({"bench", "--target", server.url, "--duration_s", "0.1",
                             "--connections", "2", "--workload", "hits"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("one full-vocabulary row (vocab"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cache-hit requests/s (hits, binary)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("server overhead p50"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("failed requests: 0"), std::string::npos) << r.out;
}

TEST(http_load,
     scores_prompts_through_open_ai_completions_and_measures_other_servers_prefill) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/stories260K/stories260K.bin");
  running_server server({"--model", model.string()});
  auto r = run_canopy({"bench", "--target", server.url, "--duration_s", "0.2",
                       "--connections", "2", "--payload", "completions,prefill",
                       "--sequence-length", "12", "--sequences", "8", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  auto doc = parse_json(r);
  ASSERT_EQ(doc.at("results").size(), 4u) << doc.dump();
  for (const auto& row : doc.at("results")) {
    EXPECT_EQ(row.at("errors"), 0) << row.dump();
    EXPECT_GT(row.at("requests"), 0) << row.dump();
    EXPECT_DOUBLE_EQ(row.at("prompt_tokens_per_second").get<double>(),
                     12 * row.at("requests_per_second").get<double>());
  }
  EXPECT_TRUE(doc.at("row_bytes").at("json").is_null()) << "no rows were asked for";

  // As for a server without GET /v1/model: no Server-Timing needed, the vocabulary given.
  r = run_canopy({"bench", "--target", server.url, "--vocab-size", "512", "--duration_s",
                  "0.2", "--connections", "1", "--workload", "misses", "--payload",
                  "prefill", "--sequence-length", "12"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("prompt tokens read (not scored) per second, misses/prefill on 1 "
                       "connection: "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("failed requests: 0"), std::string::npos) << r.out;
}

TEST(http_load, measures_next_byte_answers_cold_and_cached) {
  CANOPY_SHARED_PATH_OR_SKIP(model, "models/stories260K/stories260K.bin");
  running_server server({"--model", model.string()});
  auto r = run_canopy({"bench", "--target", server.url, "--duration_s", "0.2",
                       "--connections", "2", "--payload", "next_byte",
                       "--sequence-length", "12", "--sequences", "8", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  auto doc = parse_json(r);
  ASSERT_EQ(doc.at("results").size(), 2u) << doc.dump(); // hits and misses
  for (const auto& row : doc.at("results")) {
    EXPECT_EQ(row.at("payload"), "next_byte") << row.dump();
    EXPECT_EQ(row.at("errors"), 0) << row.dump();
    EXPECT_GT(row.at("requests"), 0) << row.dump();
  }
  // 256 values, whatever the vocabulary: far below stories260K's 512-value JSON row.
  const auto answer_bytes = doc.at("row_bytes").at("next_byte_json").get<double>();
  EXPECT_GT(answer_bytes, 256.0);
  EXPECT_LT(answer_bytes, 256.0 * 24 + 200);
  EXPECT_TRUE(doc.at("row_bytes").at("json").is_null()) << "no rows were asked for";
}

TEST(http_load, needs_the_servers_token_when_it_asks_for_one) {
  const auto token_file = unique_temp_path("canopy-token");
  std::ofstream(token_file) << "s3cret-token\n";
  running_server server({"--backend", "mock", "--auth-token-file", token_file.string()});
  const std::vector<std::string> run{"bench", "--target",      server.url, "--duration_s",
                                     "0.1",   "--connections", "2",        "--workload",
                                     "misses"};
  auto r = run_canopy(run);
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("401"), std::string::npos) << describe(r);
  EXPECT_NE(r.err.find("--auth-token-file"), std::string::npos) << describe(r);

  auto with_token = run;
  with_token.insert(with_token.end(),
                    {"--auth-token-file", token_file.string(), "--json"});
  r = run_canopy(with_token);
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(parse_json(r).value("errors", -1), 0);
  std::filesystem::remove(token_file);
}

TEST(http_load, failed_answers_are_listed_and_fail_the_run) {
  refusing_server server;
  const auto r = run_canopy({"bench", "--target", server.url(), "--duration_s", "0.2",
                             "--connections", "1", "--workload", "misses", "--payload",
                             "binary", "--json"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("misses/binary on 1 connection"), std::string::npos)
      << describe(r);
  EXPECT_NE(r.err.find("HTTP 503"), std::string::npos) << describe(r);
  EXPECT_NE(r.err.find("refused by the test"), std::string::npos) << describe(r);
  const auto doc = parse_json(r);
  ASSERT_TRUE(doc.is_object());
  EXPECT_GT(doc.at("errors"), 0);
  EXPECT_EQ(doc.at("results").at(0).at("requests"), 0);
}

TEST(http_load, nothing_listening_fails_clearly) {
  const loopback_socket bound_not_listening; // connections to it are refused
  ASSERT_NE(bound_not_listening.port, 0);
  const auto r =
      run_canopy({"bench", "--target", bound_not_listening.url(), "--duration_s", "0.1"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("cannot connect to " + bound_not_listening.url()),
            std::string::npos)
      << describe(r);
  EXPECT_NE(r.err.find("refused"), std::string::npos) << describe(r);
}

TEST(http_load, refuses_a_target_that_is_not_http_host_port) {
  // Each run starts the program, most of a second: two cases only.
  for (const char* bad : {"https://127.0.0.1:8080", "http://127.0.0.1:8080/v1"}) {
    const auto r = run_canopy({"bench", "--target", bad});
    EXPECT_EQ(r.exit_code, 2) << bad << '\n' << describe(r);
    EXPECT_NE(r.err.find("--target"), std::string::npos) << bad << '\n' << describe(r);
  }
}

} // namespace
