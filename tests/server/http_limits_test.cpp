// The transport's limits over real loopback sockets: body and header sizes, header,
// body, idle and write timeouts, bearer auth, malformed requests. Each answer is the
// API's error shape with docs/http-api.md's code.

#include "http_test_client.hpp"
#include "running_server.hpp"
#include "scripted_handler.hpp"
#include "transport_expectations.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace canopy::server::testing {
namespace {

TEST(http_limits, a_body_over_the_limit_gets_413_before_it_is_sent) {
  scripted_handler handler;
  auto options = test_options();
  options.max_body_bytes = 1000;
  running_server server(options, handler);
  test_client client(server.port());
  // Only the header: the answer must come without the body.
  ASSERT_TRUE(client.send("POST /v1/logprobs HTTP/1.1\r\nHost: a\r\n"
                          "Content-Length: 100000\r\n\r\n"));
  auto response = client.read_response(2s);
  expect_error(response, 413, "payload_too_large");
  EXPECT_EQ(response->header("connection"), "close");
  EXPECT_TRUE(client.closed_within(2s));
  EXPECT_TRUE(handler.calls(0).empty());
}

TEST(http_limits, chunked_bodies_are_read_whole_within_the_limit_and_refused_over_it) {
  scripted_handler handler;
  auto options = test_options();
  options.max_body_bytes = 1000;
  running_server server(options, handler);
  const std::string head =
      "POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";

  test_client small(server.port());
  ASSERT_TRUE(small.send(head + "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"));
  EXPECT_EQ(echo_of(small.read_response())["body"], "hello world");

  test_client large(server.port());
  ASSERT_TRUE(large.send(head + "258\r\n" + std::string(600, 'x') + "\r\n"));
  ASSERT_TRUE(large.send("258\r\n" + std::string(600, 'x') + "\r\n0\r\n\r\n"));
  expect_error(large.read_response(2s), 413, "payload_too_large");
  EXPECT_EQ(handler.calls(0).size(), 1u);
}

// A chunk extension (or a trailer) longer than the read buffer cannot be parsed however
// long the server reads: it waited for the body timeout, then answered 408.
TEST(http_limits, a_chunk_line_longer_than_the_read_buffer_gets_400_at_once) {
  scripted_handler handler;
  auto options = test_options();
  options.max_header_bytes = 1024;
  options.body_timeout = std::chrono::milliseconds(30000);
  running_server server(options, handler);
  test_client client(server.port());
  ASSERT_TRUE(
      client.send("POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "5;ext=" +
                  std::string(64u << 10, 'e')));
  auto response = client.read_response(3s);
  expect_error(response, 400, "malformed_http");
  EXPECT_NE(response->body.find("chunk extension or trailer is longer than"),
            std::string::npos)
      << response->body;
  EXPECT_TRUE(handler.calls(0).empty());
}

TEST(http_limits, a_header_section_over_the_limit_gets_431) {
  scripted_handler handler;
  auto options = test_options();
  options.max_header_bytes = 1024;
  running_server server(options, handler);
  test_client client(server.port());
  ASSERT_TRUE(client.send(
      make_request("GET", "/", "", "X-Big: " + std::string(2000, 'a') + "\r\n")));
  expect_error(client.read_response(2s), 431, "header_too_large");
  EXPECT_TRUE(client.closed_within(2s));
  EXPECT_TRUE(handler.calls(0).empty());
}

TEST(http_limits, a_header_trickling_in_gets_408_at_the_header_timeout) {
  scripted_handler handler;
  auto options = test_options();
  options.header_timeout = 200ms;
  running_server server(options, handler);
  test_client client(server.port());
  auto start = clock_type::now();
  ASSERT_TRUE(client.send("GET /slow HTTP/1.1\r\n"));
  // Slowloris: a header line every 40 ms does not extend the deadline.
  std::optional<test_response> response;
  while (!response && since(start) < 2s) {
    client.send("X-Drip: 1\r\n");
    response = client.read_response(40ms);
  }
  auto took = since(start);
  expect_error(response, 408, "request_timeout");
  EXPECT_GE(took, 190ms);
  EXPECT_LT(took, 2s);
  EXPECT_TRUE(client.closed_within(2s));
}

TEST(http_limits, a_body_that_does_not_arrive_gets_408_at_the_body_timeout) {
  scripted_handler handler;
  auto options = test_options();
  options.body_timeout = 200ms;
  running_server server(options, handler);
  test_client client(server.port());
  auto start = clock_type::now();
  ASSERT_TRUE(client.send(
      "POST /v1/sample HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc"));
  auto response = client.read_response(2s);
  EXPECT_GE(since(start), 190ms);
  expect_error(response, 408, "request_timeout");
  EXPECT_TRUE(handler.calls(0).empty());
}

TEST(http_limits, an_idle_connection_is_closed_silently_after_the_idle_timeout) {
  scripted_handler handler;
  auto options = test_options();
  options.idle_timeout = 200ms;
  running_server server(options, handler);

  test_client used(server.port());
  ASSERT_TRUE(used.send(make_request("GET", "/once")));
  echo_of(used.read_response());
  auto start = clock_type::now();
  EXPECT_TRUE(used.closed_within(2s));
  EXPECT_GE(since(start), 150ms);

  start = clock_type::now();
  test_client silent(server.port());
  EXPECT_TRUE(silent.closed_within(2s));
  EXPECT_GE(since(start), 150ms);
}

TEST(http_limits, a_client_that_stops_reading_is_closed_after_the_write_stall_timeout) {
  scripted_handler handler(scripted_handler::mode::hold);
  auto options = test_options();
  options.idle_timeout = 60s; // not the one that ends a stalled write
  options.write_stall_timeout = 200ms;
  running_server server(options, handler);
  test_client client(server.port());
  ASSERT_TRUE(client.send(make_request("GET", "/v1/vocab")));
  auto calls = handler.calls(1);
  ASSERT_EQ(calls.size(), 1u);
  // Far more than the socket buffers hold, and the client reads none of it.
  http_response huge;
  huge.body.assign(64u << 20, 'x');
  calls[0].respond(std::move(huge));
  auto start = clock_type::now();
  EXPECT_TRUE(
      eventually([&] { return server.metrics().snapshot().connections_open == 0; }, 5s));
  EXPECT_GE(since(start), 150ms);
  EXPECT_EQ(server.metrics().snapshot().request_seconds.count, 0u);
}

TEST(http_limits, bearer_auth_guards_everything_but_get_healthz) {
  scripted_handler handler;
  auto options = test_options();
  options.auth_tokens = {"s3cret-token"};
  running_server server(options, handler);
  auto refused = [&](const std::string& request) {
    test_client client(server.port());
    ASSERT_TRUE(client.send(request));
    auto response = client.read_response(2s);
    expect_error(response, 401, "unauthorized");
    EXPECT_EQ(response->header("www-authenticate"), "Bearer");
    EXPECT_TRUE(client.closed_within(2s));
  };
  refused(make_request("GET", "/v1/model"));
  refused(make_request("GET", "/v1/model", "", "Authorization: Bearer s3cret-tokem\r\n"));
  refused(make_request("GET", "/v1/model", "", "Authorization: Bearer s3cret\r\n"));
  refused(
      make_request("GET", "/v1/model", "", "Authorization: Bearer s3cret-token2\r\n"));
  refused(make_request("GET", "/v1/model", "", "Authorization: Basic s3cret-token\r\n"));
  refused(make_request("POST", "/healthz", "{}"));
  EXPECT_TRUE(handler.calls(0).empty());

  test_client client(server.port());
  ASSERT_TRUE(client.send(
      make_request("GET", "/v1/model", "", "Authorization: Bearer s3cret-token\r\n")));
  EXPECT_EQ(echo_of(client.read_response())["target"], "/v1/model");
  ASSERT_TRUE(client.send(make_request("POST", "/v1/tokenize", "{}",
                                       "authorization: bearer s3cret-token\r\n")));
  EXPECT_EQ(echo_of(client.read_response())["target"], "/v1/tokenize");
  ASSERT_TRUE(client.send(make_request("GET", "/healthz")));
  EXPECT_EQ(echo_of(client.read_response())["target"], "/healthz");
  EXPECT_EQ(handler.calls(0).size(), 3u);
  EXPECT_EQ(handler.calls(0).front().request.tenant, "") << "one token: no tenants";
}

// The page's files hold no data, so a browser loads them before it has the token; the
// page then asks for it, and the API still needs it. Without the page they are guarded.
TEST(http_limits, the_pages_files_are_open_only_while_the_page_is_served) {
  for (const bool page : {true, false}) {
    scripted_handler handler;
    auto options = test_options();
    options.auth_tokens = {"s3cret-token"};
    options.web_page = page;
    running_server server(options, handler);
    for (const char* target : {"/", "/web/page.js"}) {
      test_client client(server.port());
      ASSERT_TRUE(client.send(make_request("GET", target)));
      auto response = client.read_response(2s);
      if (page)
        EXPECT_EQ(echo_of(response)["target"], target);
      else
        expect_error(response, 401, "unauthorized");
    }
    test_client client(server.port());
    ASSERT_TRUE(client.send(make_request("POST", "/", "{}")));
    expect_error(client.read_response(2s), 401, "unauthorized");
    EXPECT_EQ(handler.calls(0).size(), page ? 2u : 0u);
  }
}

TEST(http_limits, with_several_tokens_each_request_names_its_tokens_tenant) {
  scripted_handler handler;
  auto options = test_options();
  options.auth_tokens = {"first-token", "second-token", "third-token"};
  running_server server(options, handler);
  test_client client(server.port());
  auto tenant_of = [&](const std::string& token) {
    EXPECT_TRUE(client.send(make_request("POST", "/v1/tokenize", "{}",
                                         "Authorization: Bearer " + token + "\r\n")));
    return echo_of(client.read_response())["tenant"].get<std::string>();
  };
  EXPECT_EQ(tenant_of("second-token"), "2");
  EXPECT_EQ(tenant_of("first-token"), "1");
  EXPECT_EQ(tenant_of("third-token"), "3");
  ASSERT_TRUE(client.send(make_request("GET", "/healthz")));
  EXPECT_EQ(echo_of(client.read_response())["tenant"], "");
  ASSERT_TRUE(client.send(
      make_request("GET", "/v1/model", "", "Authorization: Bearer fourth-token\r\n")));
  expect_error(client.read_response(2s), 401, "unauthorized");
}

TEST(http_limits, malformed_http_gets_400) {
  scripted_handler handler;
  running_server server(test_options(), handler);
  for (const std::string request :
       {"this is not http\r\n\r\n",
        "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: abc\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: a\r\nBad Header: 1\r\n\r\n"}) {
    test_client client(server.port());
    ASSERT_TRUE(client.send(request));
    expect_error(client.read_response(2s), 400, "malformed_http");
    EXPECT_TRUE(client.closed_within(2s));
  }
  EXPECT_TRUE(handler.calls(0).empty());
}

TEST(http_limits,
     transfer_codings_other_than_chunked_are_refused_and_the_body_never_read) {
  // The body that follows must never be read as a request of its own (smuggling).
  scripted_handler handler;
  running_server server(test_options(), handler);
  const std::string smuggled = "GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n";
  const std::vector<std::pair<std::string, int>> cases = {
      {"xchunked", 501}, {"gzip, chunked", 501},    {"chunked, identity", 400},
      {"identity", 501}, {"chunked, chunked", 501}, {"chunked x", 501}};
  for (const auto& [coding, status] : cases) {
    test_client client(server.port());
    ASSERT_TRUE(client.send("POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: " +
                            coding + "\r\n\r\n" + smuggled));
    expect_error(client.read_response(2s), status, "unsupported_transfer_encoding");
    EXPECT_TRUE(client.closed_within(2s)) << coding;
  }
  EXPECT_TRUE(handler.calls(0).empty());
  // Chunked alone, in any case, is read as it should be.
  test_client client(server.port());
  ASSERT_TRUE(
      client.send("POST /ok HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n"
                  "3\r\nabc\r\n0\r\n\r\n"));
  EXPECT_EQ(echo_of(client.read_response(2s))["body"], "abc");
}

} // namespace
} // namespace canopy::server::testing
