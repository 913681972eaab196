// Streamed answers (http_response::stream) over real loopback sockets: pieces leave as
// the handler pushes them (chunked, or unframed for HTTP/1.0), the request stays in
// flight until the stream ends (pipelined requests wait; a client that leaves cancels
// it; a drain lets it finish), and a client that stops reading is cut off.

#include "http_test_client.hpp"
#include "running_server.hpp"
#include "scripted_handler.hpp"
#include "transport_expectations.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace canopy::server::testing {
namespace {

/// Sends `request` on `client` and answers the first call with a streamed answer whose
/// first piece is "data: one\n\n"; the test pushes the rest to the stream returned.
std::shared_ptr<body_stream> open_stream(scripted_handler& handler, test_client& client,
                                         const std::string& request) {
  EXPECT_TRUE(client.send(request));
  auto calls = handler.calls(1);
  if (calls.empty())
    throw std::runtime_error("the request never reached the handler");
  auto rest = std::make_shared<body_stream>();
  http_response head;
  head.content_type = "text/event-stream";
  head.body = "data: one\n\n";
  head.stream = rest;
  head.stream_cut = "data: cut\n\n";
  calls[0].respond(std::move(head));
  return rest;
}

const std::string completions_request = make_request("POST", "/v1/completions", "{}");

TEST(http_stream, pieces_leave_as_they_come_and_a_pipelined_request_waits_for_the_end) {
  scripted_handler handler(scripted_handler::mode::hold);
  running_server server(test_options(), handler);
  test_client client(server.port());
  auto rest =
      open_stream(handler, client, completions_request + make_request("GET", "/next"));

  // The head and the first piece arrive before the stream ends.
  std::string seen;
  ASSERT_TRUE(eventually([&] {
    seen = client.unread_within(20ms);
    return seen.find("data: one") != std::string::npos;
  }));
  EXPECT_NE(seen.find("Transfer-Encoding: chunked"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("0\r\n\r\n"), std::string::npos) << "ended early: " << seen;
  rest->push("data: two\n\n");
  ASSERT_TRUE(eventually(
      [&] { return client.unread_within(20ms).find("data: two") != std::string::npos; }));
  // Still in flight: the pipelined request has not reached the handler.
  EXPECT_EQ(handler.calls(2, 50ms).size(), 1u);

  rest->push(""); // nothing, and not the end of the body
  rest->end();
  rest->push("data: late\n\n"); // after the end: dropped
  auto streamed = client.read_response(2s);
  ASSERT_TRUE(streamed);
  EXPECT_EQ(streamed->status, 200);
  EXPECT_EQ(streamed->header("content-type"), "text/event-stream");
  EXPECT_EQ(streamed->body, "data: one\n\ndata: two\n\n");

  // Counted once written, with every body byte.
  EXPECT_TRUE(eventually([&] {
    return count_of(server.metrics().snapshot(), "/v1/completions", 200) == 1;
  }));
  EXPECT_EQ(server.metrics().snapshot().bytes_sent, streamed->body.size());

  auto calls = handler.calls(2);
  ASSERT_EQ(calls.size(), 2u);
  calls[1].respond(scripted_handler::echo(calls[1].id, calls[1].request));
  EXPECT_EQ(echo_of(client.read_response())["target"], "/next");
  EXPECT_TRUE(handler.cancelled(0).empty());
}

TEST(http_stream, http_1_0_gets_the_pieces_unframed_and_the_connection_ends_the_body) {
  scripted_handler handler(scripted_handler::mode::hold);
  running_server server(test_options(), handler);
  test_client client(server.port());
  auto rest = open_stream(handler, client,
                          "POST /v1/completions HTTP/1.0\r\nConnection: keep-alive\r\n"
                          "Content-Length: 2\r\n\r\n{}");
  rest->push("data: two\n\n");
  EXPECT_FALSE(client.read_response(100ms)) << "the body ended before the stream did";
  rest->end();
  auto streamed = client.read_response(2s);
  ASSERT_TRUE(streamed);
  EXPECT_EQ(streamed->header("transfer-encoding"), "");
  EXPECT_EQ(streamed->header("content-length"), "");
  EXPECT_EQ(streamed->header("connection"), ""); // HTTP/1.0's default: close
  EXPECT_EQ(streamed->body, "data: one\n\ndata: two\n\n");
}

TEST(http_stream, a_client_leaving_mid_stream_cancels_it_and_later_pieces_are_harmless) {
  scripted_handler handler(scripted_handler::mode::hold);
  running_server server(test_options(), handler);
  std::shared_ptr<body_stream> rest;
  {
    test_client client(server.port());
    rest = open_stream(handler, client, completions_request);
    ASSERT_TRUE(eventually([&] {
      return client.unread_within(20ms).find("data: one") != std::string::npos;
    }));
    client.reset();
  }
  auto cancelled = handler.cancelled(1);
  ASSERT_EQ(cancelled.size(), 1u);
  EXPECT_EQ(cancelled[0], handler.calls(1)[0].id);
  rest->push("data: two\n\n");
  rest->end();
  // The server goes on serving; the abandoned stream is not counted as answered.
  test_client next(server.port());
  ASSERT_TRUE(next.send(make_request("GET", "/next")));
  auto calls = handler.calls(2);
  ASSERT_EQ(calls.size(), 2u);
  calls[1].respond(scripted_handler::echo(calls[1].id, calls[1].request));
  EXPECT_EQ(echo_of(next.read_response())["target"], "/next");
  EXPECT_EQ(count_of(server.metrics().snapshot(), "/v1/completions", 200), 0u);
}

TEST(http_stream,
     a_client_that_stops_reading_a_stream_is_cut_off_at_the_write_stall_timeout) {
  scripted_handler handler(scripted_handler::mode::hold);
  auto options = test_options();
  options.write_stall_timeout = 200ms;
  running_server server(options, handler);
  test_client client(server.port());
  auto rest = open_stream(handler, client, completions_request);
  // Far more than the socket buffers hold, and the client reads none of it.
  for (int i = 0; i < 64; ++i)
    rest->push(std::string(1u << 20, 'x'));
  EXPECT_TRUE(
      eventually([&] { return server.metrics().snapshot().connections_open == 0; }, 5s));
  EXPECT_EQ(handler.cancelled(1).size(), 1u);
}

TEST(http_stream, a_drain_lets_a_stream_finish_then_closes) {
  scripted_handler handler(scripted_handler::mode::hold);
  running_server server(test_options(), handler);
  test_client client(server.port());
  auto rest = open_stream(handler, client, completions_request);
  server.stop();
  EXPECT_FALSE(server.wait_stopped(50ms)) << "run() returned with a stream owed";
  rest->push("data: two\n\n");
  rest->end();
  auto streamed = client.read_response(2s);
  ASSERT_TRUE(streamed);
  EXPECT_EQ(streamed->body, "data: one\n\ndata: two\n\n");
  EXPECT_TRUE(client.closed_within(2s));
  EXPECT_TRUE(server.wait_stopped(2s));
}

// At the drain deadline a stream still open was cut mid-body with no word: it now ends
// properly, with its cut piece (an error event), within a second.
TEST(http_stream, a_stream_open_at_the_drain_deadline_ends_with_its_cut_piece) {
  scripted_handler handler(scripted_handler::mode::hold);
  auto options = test_options();
  options.drain_timeout = std::chrono::milliseconds(300);
  running_server server(options, handler);
  test_client client(server.port());
  auto rest = open_stream(handler, client, completions_request);
  rest->push("data: two\n\n");
  server.stop();
  auto streamed = client.read_response(3s);
  ASSERT_TRUE(streamed) << "the chunked body ended properly";
  EXPECT_EQ(streamed->body, "data: one\n\ndata: two\n\ndata: cut\n\n");
  EXPECT_TRUE(client.closed_within(2s));
  EXPECT_TRUE(server.wait_stopped(3s));
  rest->push("data: late\n\n"); // the handler's later pieces are harmless
}

} // namespace
} // namespace canopy::server::testing
