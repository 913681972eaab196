#pragma once
// Expectations on the request parsers' results (api_requests.hpp), shared by their tests:
// the accepted request, or a 400 with its code and a message naming the fault.
// Thread contract: test threads.

#include <canopy/server/api/api_requests.hpp>

#include <gtest/gtest.h>

#include <string>
#include <variant>

namespace canopy::server {

/// The accepted request (a copy: callers pass the parse result as a temporary).
template <class T> T accepted(const parsed<T>& result) {
  if (const auto* error = std::get_if<api_error>(&result)) {
    ADD_FAILURE() << "refused: " << error->code << ": " << error->message;
    return T{};
  }
  return std::get<T>(result);
}

/// A 400 with `code` whose message contains `text`.
template <class T>
::testing::AssertionResult refused(const parsed<T>& result, const std::string& code,
                                   const std::string& text) {
  const auto* error = std::get_if<api_error>(&result);
  if (error == nullptr)
    return ::testing::AssertionFailure() << "accepted, expected " << code;
  if (error->status != 400 || error->code != code ||
      error->message.find(text) == std::string::npos)
    return ::testing::AssertionFailure()
           << "got " << error->status << " " << error->code << ": \"" << error->message
           << "\", expected 400 " << code << " containing \"" << text << "\"";
  return ::testing::AssertionSuccess();
}

} // namespace canopy::server
