// The HTTP transport over real loopback sockets: keep-alive, pipelining, respond
// callbacks from other threads (even after their connection or the server is gone),
// cancellation, many connections and the connection limit, drain, metrics.

#include "http_test_client.hpp"
#include "running_server.hpp"
#include "scripted_handler.hpp"
#include "transport_expectations.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace canopy::server::testing {
namespace {

TEST(http_server, serves_several_requests_on_one_keep_alive_connection) {
  scripted_handler handler;
  running_server server(test_options(), handler);
  test_client client(server.port());
  std::set<request_id> ids;
  for (int i = 0; i < 3; ++i) {
    auto body = "{\"n\": " + std::to_string(i) + "}";
    auto target = "/v1/logprobs?i=" + std::to_string(i);
    ASSERT_TRUE(client.send(make_request("POST", target, body,
                                         "Content-Type: application/json\r\n"
                                         "Accept: application/octet-stream\r\n")));
    auto response = client.read_response();
    auto echo = echo_of(response);
    EXPECT_EQ(echo["method"], "POST");
    EXPECT_EQ(echo["target"], target);
    EXPECT_EQ(echo["content_type"], "application/json");
    EXPECT_EQ(echo["accept"], "application/octet-stream");
    EXPECT_EQ(echo["body"], body);
    EXPECT_EQ(response->header("server"), "canopy");
    EXPECT_EQ(response->header("content-type"), "application/json");
    EXPECT_EQ(response->header("content-length"), std::to_string(response->body.size()));
    EXPECT_EQ(response->header("x-echo"), "yes");
    EXPECT_NE(response->header("connection"), "close");
    ids.insert(echo["id"].get<request_id>());
  }
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_EQ(server.metrics().snapshot().connections_accepted, 1u);
}

TEST(http_server, connection_close_and_http_1_0_end_the_connection_after_the_answer) {
  scripted_handler handler;
  running_server server(test_options(), handler);

  test_client closing(server.port());
  ASSERT_TRUE(closing.send(make_request("GET", "/c", "", "Connection: close\r\n")));
  auto response = closing.read_response();
  echo_of(response);
  EXPECT_EQ(response->header("connection"), "close");
  EXPECT_TRUE(closing.closed_within(2s));

  test_client plain(server.port());
  ASSERT_TRUE(plain.send("GET /a HTTP/1.0\r\n\r\n"));
  echo_of(plain.read_response());
  EXPECT_TRUE(plain.closed_within(2s));

  test_client kept(server.port());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(kept.send("GET /b HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
    auto response = kept.read_response();
    echo_of(response);
    EXPECT_EQ(response->header("connection"), "keep-alive");
  }
}

TEST(http_server, pipelined_requests_are_handled_one_at_a_time_and_answered_in_order) {
  scripted_handler handler(scripted_handler::mode::hold);
  running_server server(test_options(), handler);
  test_client client(server.port());
  const std::vector<std::string> targets = {"/a", "/b", "/c"};
  ASSERT_TRUE(client.send(make_request("GET", "/a") + make_request("POST", "/b", "xyz") +
                          make_request("GET", "/c")));
  for (std::size_t i = 0; i < targets.size(); ++i) {
    auto calls = handler.calls(i + 1);
    ASSERT_EQ(calls.size(), i + 1);
    EXPECT_EQ(calls[i].request.target, targets[i]);
    // The next request waits until this one's answer is written.
    std::this_thread::sleep_for(30ms);
    EXPECT_EQ(handler.calls(0).size(), i + 1);
    calls[i].respond(scripted_handler::echo(calls[i].id, calls[i].request));
  }
  for (const auto& target : targets)
    EXPECT_EQ(echo_of(client.read_response())["target"], target);
  EXPECT_TRUE(handler.cancelled(0).empty());
}

TEST(http_server, a_burst_of_pipelined_requests_in_one_write_is_answered_in_order) {
  scripted_handler handler;
  running_server server(test_options(), handler);
  test_client client(server.port());
  std::string burst;
  for (int i = 0; i < 50; ++i)
    burst += make_request("POST", "/n/" + std::to_string(i), std::string(i * 40, 'x'));
  ASSERT_TRUE(client.send(burst));
  for (int i = 0; i < 50; ++i) {
    auto echo = echo_of(client.read_response());
    EXPECT_EQ(echo["target"], "/n/" + std::to_string(i));
    EXPECT_EQ(echo["body"].get<std::string>().size(), std::size_t(i * 40));
  }
}

TEST(http_server, pipelined_requests_past_the_read_buffer_wait_while_one_is_computed) {
  // 400 pipelined requests of 91 bytes (36 KiB, more than the read buffer) arrive while
  // the first is being computed: reading stops when the buffer is full and resumes as
  // requests leave it; every one is answered, in order.
  scripted_handler handler(scripted_handler::mode::hold);
  running_server server(test_options(), handler);
  test_client client(server.port());
  constexpr int count = 400;
  std::string burst;
  for (int i = 0; i < count; ++i) {
    const std::string head =
        "GET /p/" + std::to_string(1000 + i) + " HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ";
    burst += head + std::string(91 - head.size() - 4, 'x') + "\r\n\r\n";
  }
  ASSERT_EQ(burst.size(), std::size_t(count) * 91);
  ASSERT_TRUE(client.send(burst));
  for (int i = 0; i < count; ++i) {
    auto calls = handler.calls(i + 1);
    ASSERT_EQ(calls.size(), std::size_t(i + 1))
        << "request " << i << " never reached the handler";
    if (i == 0)
      std::this_thread::sleep_for(100ms); // the rest piles up behind the first
    calls[i].respond(scripted_handler::echo(calls[i].id, calls[i].request));
  }
  for (int i = 0; i < count; ++i)
    ASSERT_EQ(echo_of(client.read_response())["target"],
              "/p/" + std::to_string(1000 + i));
}

TEST(http_server, a_half_closed_client_gets_every_answer_it_asked_for) {
  // Three pipelined requests, then the client shuts its sending side: that says it
  // will send nothing more, not that it left. All three are answered, in order, however
  // late, and then the server closes.
  scripted_handler handler(scripted_handler::mode::hold);
  running_server server(test_options(), handler);
  test_client client(server.port());
  ASSERT_TRUE(client.send(make_request("GET", "/a") + make_request("POST", "/b", "xyz") +
                          make_request("GET", "/c")));
  client.shutdown_send();
  for (std::size_t i = 0; i < 3; ++i) {
    auto calls = handler.calls(i + 1);
    ASSERT_EQ(calls.size(), i + 1);
    std::this_thread::sleep_for(50ms); // not instant
    calls[i].respond(scripted_handler::echo(calls[i].id, calls[i].request));
  }
  for (const std::string target : {"/a", "/b", "/c"})
    EXPECT_EQ(echo_of(client.read_response())["target"], target);
  EXPECT_TRUE(client.closed_within(2s));
  EXPECT_TRUE(handler.cancelled(0).empty());
}

TEST(http_server, respond_may_come_later_from_another_thread) {
  scripted_handler handler(scripted_handler::mode::hold);
  running_server server(test_options(), handler);
  test_client client(server.port());
  ASSERT_TRUE(client.send(make_request("GET", "/later")));
  auto calls = handler.calls(1);
  ASSERT_EQ(calls.size(), 1u);
  std::thread answerer([call = calls[0]] {
    std::this_thread::sleep_for(20ms);
    call.respond(scripted_handler::echo(call.id, call.request));
  });
  EXPECT_EQ(echo_of(client.read_response())["target"], "/later");
  answerer.join();
}

TEST(http_server, a_client_leaving_cancels_its_request_and_a_late_respond_is_harmless) {
  scripted_handler handler(scripted_handler::mode::hold);
  running_server server(test_options(), handler);
  {
    test_client client(server.port());
    ASSERT_TRUE(client.send(make_request("POST", "/v1/logprobs", "{}")));
    ASSERT_EQ(handler.calls(1).size(), 1u);
    client.reset();
  }
  auto call = handler.calls(1)[0];
  auto cancelled = handler.cancelled(1);
  ASSERT_EQ(cancelled.size(), 1u);
  EXPECT_EQ(cancelled[0], call.id);
  EXPECT_EQ(server.metrics().snapshot().cancelled_requests, 1u);
  call.respond(scripted_handler::echo(call.id, call.request));

  // The server goes on serving, and cancelled the request once.
  test_client next(server.port());
  ASSERT_TRUE(next.send(make_request("GET", "/next")));
  auto calls = handler.calls(2);
  ASSERT_EQ(calls.size(), 2u);
  calls[1].respond(scripted_handler::echo(calls[1].id, calls[1].request));
  EXPECT_EQ(echo_of(next.read_response())["target"], "/next");
  EXPECT_EQ(handler.cancelled(2, 50ms).size(), 1u);
  // Counted once written, which may trail the client's read a little.
  EXPECT_TRUE(eventually(
      [&] { return count_of(server.metrics().snapshot(), "other", 200) == 1; }));
  EXPECT_EQ(server.metrics().snapshot().request_seconds.count, 1u);
}

TEST(http_server, hundreds_of_concurrent_connections_are_all_answered) {
  constexpr std::size_t connections = 400;
  scripted_handler handler(scripted_handler::mode::hold);
  running_server server(test_options(), handler);
  std::vector<std::unique_ptr<test_client>> clients;
  for (std::size_t i = 0; i < connections; ++i) {
    clients.push_back(std::make_unique<test_client>(server.port()));
    ASSERT_TRUE(clients.back()->send(make_request("GET", "/n/" + std::to_string(i))));
  }
  // Every request is in flight at once before any is answered.
  auto calls = handler.calls(connections, 10s);
  ASSERT_EQ(calls.size(), connections);
  auto answer_every_other = [&calls](std::size_t first) {
    for (std::size_t i = first; i < calls.size(); i += 2)
      calls[i].respond(scripted_handler::echo(calls[i].id, calls[i].request));
  };
  std::thread odd(answer_every_other, 1);
  answer_every_other(0);
  odd.join();
  for (std::size_t i = 0; i < connections; ++i)
    EXPECT_EQ(echo_of(clients[i]->read_response())["target"], "/n/" + std::to_string(i));
  EXPECT_EQ(server.metrics().snapshot().connections_accepted, connections);
}

TEST(http_server, connections_over_the_limit_are_closed_at_once) {
  scripted_handler handler;
  auto options = test_options();
  options.max_connections = 2;
  running_server server(options, handler);
  auto first = std::make_unique<test_client>(server.port());
  test_client second(server.port());
  for (auto* client : {first.get(), &second}) {
    ASSERT_TRUE(client->send(make_request("GET", "/held-open")));
    echo_of(client->read_response());
  }
  test_client third(server.port());
  EXPECT_TRUE(third.closed_within(2s));
  EXPECT_EQ(server.metrics().snapshot().connections_refused, 1u);

  // A closed connection frees its slot.
  first.reset();
  EXPECT_TRUE(eventually([&] {
    test_client again(server.port());
    return again.send(make_request("GET", "/again")) && again.read_response(500ms);
  }));
}

TEST(http_server, stop_answers_the_request_in_flight_closes_the_rest_then_run_returns) {
  scripted_handler handler(scripted_handler::mode::hold);
  running_server server(test_options(), handler);
  test_client busy(server.port());
  test_client idle(server.port());
  test_client partial(server.port());
  ASSERT_TRUE(busy.send(make_request("GET", "/busy")));
  ASSERT_TRUE(partial.send("GET /partial HTTP/1.1\r\nHo"));
  auto calls = handler.calls(1);
  ASSERT_EQ(calls.size(), 1u);
  ASSERT_TRUE(
      eventually([&] { return server.metrics().snapshot().connections_open == 3; }));

  server.stop();
  EXPECT_TRUE(idle.closed_within(2s));
  EXPECT_TRUE(partial.closed_within(2s));
  EXPECT_FALSE(server.wait_stopped(30ms)) << "run() returned with an answer owed";
  calls[0].respond(scripted_handler::echo(calls[0].id, calls[0].request));
  auto response = busy.read_response(2s);
  EXPECT_EQ(echo_of(response)["target"], "/busy");
  EXPECT_EQ(response->header("connection"), "close");
  EXPECT_TRUE(busy.closed_within(2s));
  EXPECT_TRUE(server.wait_stopped(2s));
  EXPECT_EQ(handler.calls(0).size(), 1u);
}

TEST(http_server, sigterm_drains_like_stop) {
  scripted_handler handler;
  running_server server(test_options(), handler);
  test_client client(server.port());
  // An answered request shows run() is serving, so its signal set is installed.
  ASSERT_TRUE(client.send(make_request("GET", "/up")));
  echo_of(client.read_response());
  std::raise(SIGTERM);
  EXPECT_TRUE(server.wait_stopped(2s));
  EXPECT_TRUE(client.closed_within(2s));
}

TEST(http_server, a_drain_ends_at_the_drain_timeout_cancelling_what_is_left) {
  // An answer that never comes (or a client that never reads it) must not hold a stop
  // open past drain_timeout.
  scripted_handler handler(scripted_handler::mode::hold);
  auto options = test_options();
  options.drain_timeout = 300ms;
  running_server server(options, handler);
  test_client busy(server.port());
  ASSERT_TRUE(busy.send(make_request("GET", "/busy")));
  ASSERT_EQ(handler.calls(1).size(), 1u);
  server.stop();
  EXPECT_FALSE(server.wait_stopped(100ms)) << "the answer in flight had its chance";
  EXPECT_TRUE(server.wait_stopped(2s));
  EXPECT_EQ(handler.cancelled(1).size(), 1u);
  EXPECT_TRUE(busy.closed_within(2s));
}

TEST(http_server, a_second_sigterm_closes_every_connection_at_once) {
  scripted_handler handler(scripted_handler::mode::hold);
  running_server server(test_options(), handler); // a drain timeout of seconds
  test_client busy(server.port());
  ASSERT_TRUE(busy.send(make_request("GET", "/busy")));
  ASSERT_EQ(handler.calls(1).size(), 1u);
  std::raise(SIGTERM);
  EXPECT_FALSE(server.wait_stopped(200ms)) << "one signal drains";
  std::raise(SIGTERM);
  EXPECT_TRUE(server.wait_stopped(2s));
  EXPECT_EQ(handler.cancelled(1).size(), 1u);
}

TEST(server_url, brackets_an_ipv6_host) {
  EXPECT_EQ(server_url("::1", 8080), "http://[::1]:8080");
  EXPECT_EQ(server_url("127.0.0.1", 80), "http://127.0.0.1:80");
  EXPECT_EQ(server_url("localhost", 1), "http://localhost:1");
}

TEST(http_server, respond_after_the_server_is_destroyed_does_nothing) {
  constexpr std::size_t requests = 20;
  scripted_handler handler(scripted_handler::mode::hold);
  std::vector<scripted_handler::call> calls;
  std::thread answerer;
  {
    running_server server(test_options(), handler);
    {
      std::vector<std::unique_ptr<test_client>> clients;
      for (std::size_t i = 0; i < requests; ++i) {
        clients.push_back(std::make_unique<test_client>(server.port()));
        ASSERT_TRUE(clients.back()->send(make_request("GET", "/gone")));
      }
      calls = handler.calls(requests);
      ASSERT_EQ(calls.size(), requests);
      for (auto& client : clients)
        client->reset();
    }
    ASSERT_EQ(handler.cancelled(requests).size(), requests);
    // Answers trickle in while the server stops and is destroyed, and after.
    answerer = std::thread([&calls] {
      for (auto& call : calls) {
        call.respond(scripted_handler::echo(call.id, call.request));
        std::this_thread::sleep_for(1ms);
      }
    });
  }
  answerer.join();
  for (auto& call : calls) // a second respond is ignored as well
    call.respond(http_response{});
}

TEST(http_server, expect_100_continue_is_answered_before_the_body) {
  scripted_handler handler;
  running_server server(test_options(), handler);
  test_client client(server.port());
  ASSERT_TRUE(client.send("POST /v1/logprobs HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
                          "Expect: 100-continue\r\n\r\n"));
  auto interim = client.read_response(2s);
  ASSERT_TRUE(interim);
  EXPECT_EQ(interim->status, 100);
  ASSERT_TRUE(client.send("hello"));
  EXPECT_EQ(echo_of(client.read_response())["body"], "hello");
}

TEST(http_server, metrics_count_requests_by_route_and_status) {
  scripted_handler handler;
  auto options = test_options();
  options.max_header_bytes = 1024;
  running_server server(options, handler);
  std::size_t sent = 0;
  test_client client(server.port());
  ASSERT_TRUE(client.send(make_request("GET", "/v1/model?verbose=1")));
  sent += client.read_response()->body.size();
  ASSERT_TRUE(client.send(make_request("POST", "/nope", "abcd")));
  sent += client.read_response()->body.size();
  test_client big(server.port());
  ASSERT_TRUE(big.send(
      make_request("GET", "/big", "", "X-Big: " + std::string(2000, 'a') + "\r\n")));
  sent += big.read_response()->body.size();

  // Counted once written, which may trail the client's read a little.
  ASSERT_TRUE(
      eventually([&] { return server.metrics().snapshot().request_seconds.count == 3; }));
  auto stats = server.metrics().snapshot();
  EXPECT_EQ(count_of(stats, "/v1/model", 200), 1u);
  EXPECT_EQ(count_of(stats, "other", 200), 1u);
  EXPECT_EQ(count_of(stats, "other", 431), 1u);
  EXPECT_EQ(stats.requests.size(), 3u);
  EXPECT_EQ(stats.request_seconds.count, 3u);
  EXPECT_EQ(stats.bytes_received, 4u);
  EXPECT_EQ(stats.bytes_sent, sent);
  EXPECT_EQ(stats.connections_accepted, 2u);
}

TEST(http_server, construction_fails_naming_host_and_port_when_it_cannot_listen) {
  scripted_handler handler;
  running_server first(test_options(), handler);
  auto options = test_options();
  options.port = first.port();
  try {
    http_server second(options, handler, std::make_shared<server_metrics>());
    FAIL() << "a second server listened on a taken port";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("127.0.0.1:" + std::to_string(first.port())),
              std::string::npos)
        << error.what();
  }
}

} // namespace
} // namespace canopy::server::testing
