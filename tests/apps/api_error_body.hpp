#pragma once
// The API's error body, {"error": {"code", "message"}}, read from a test_response.
// Thread contract: pure functions.

#include "http_test_client.hpp"

#include <nlohmann/json.hpp>

#include <exception>
#include <string>

namespace canopy::testing {

/// The error's code, or a note quoting the body when it is not an error body.
inline std::string error_code(const test_response& reply) {
  try {
    return nlohmann::json::parse(reply.body).at("error").at("code").get<std::string>();
  } catch (const std::exception&) {
    return "<not an error body: " + reply.body.substr(0, 200) + ">";
  }
}

/// The error's message (throws when the body is not an error body).
inline std::string error_message(const test_response& reply) {
  return nlohmann::json::parse(reply.body).at("error").at("message").get<std::string>();
}

} // namespace canopy::testing
