#pragma once
// Checks the transport's tests share: the API's error shape, the scripted handler's
// echo, the metrics' request counts, and waiting for a condition with a bound; and
// the test client (tests/support/http_test_client.hpp) named in this namespace.
// Thread contract: the test's thread.

#include "http_test_client.hpp"

#include <canopy/server/server_metrics.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>

namespace canopy::server::testing {

using canopy::testing::make_request;
using canopy::testing::test_client;
using canopy::testing::test_response;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using json = nlohmann::json;

inline std::chrono::milliseconds since(clock_type::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - start);
}

/// Polls `condition` until it holds (true) or `timeout` passes (false).
inline bool eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds timeout = 2s) {
  auto until = clock_type::now() + timeout;
  while (!condition()) {
    if (clock_type::now() > until)
      return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

/// An API error as docs/http-api.md's contract has it: the status, JSON, and
/// {"error": {"code": <code>, "message": <non-empty>}}.
inline void expect_error(const std::optional<test_response>& response, int status,
                         const std::string& code) {
  ASSERT_TRUE(response) << "no response";
  EXPECT_EQ(response->status, status);
  EXPECT_EQ(response->header("content-type"), "application/json");
  auto body = json::parse(response->body);
  EXPECT_EQ(body.at("error").at("code"), code);
  EXPECT_FALSE(body.at("error").at("message").get<std::string>().empty());
}

/// The scripted handler's echo in a 200 response (null when there is none).
inline json echo_of(const std::optional<test_response>& response) {
  EXPECT_TRUE(response);
  EXPECT_EQ(response ? response->status : 0, 200);
  return response ? json::parse(response->body) : json();
}

/// Responses written for `route` with `status`.
inline std::uint64_t count_of(const server_stats& stats, const std::string& route,
                              int status) {
  for (const auto& [key, count] : stats.requests)
    if (key == std::make_pair(route, status))
      return count;
  return 0;
}

} // namespace canopy::server::testing
