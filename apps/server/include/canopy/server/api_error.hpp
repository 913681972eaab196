#pragma once
// An API error: an HTTP status, a stable machine-readable code and a message naming
// what is wrong. Every error response has the body
//   {"error": {"code": "<code>", "message": "<message>", "type": "<type>", "param":
//   null}}
// which is also OpenAI's error object: type is authentication_error (401),
// not_found_error (404), server_error (5xx) or invalid_request_error, and the message
// names the field at fault (param stays null).
// Thread contract: plain values and pure functions.

#include <canopy/messages/errors.hpp>
#include <canopy/server/transport/byte_budget.hpp>
#include <canopy/server/transport/http_message.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace canopy::server {

struct api_error {
  int status = 400;
  std::string code;    // e.g. "malformed_json", "token_out_of_range", "not_found"
  std::string message; // names the field or value at fault
};

/// The response carrying `error` (JSON body as above; a 405 should add an Allow header
/// itself).
http_response to_response(const api_error& error);

/// 503 server_busy with "Retry-After: 1": `budget` (held by `holders`, set by `flag`)
/// has no room for the `needed` bytes (or other `unit`s) of a request.
http_response budget_full(const byte_budget& budget, std::size_t needed,
                          std::string_view holders, std::string_view flag,
                          std::string_view unit = "bytes");

/// An engine error as an API error: the errc's name as the code, and its HTTP status:
/// 400 for input the client can fix (empty_sequence, token_out_of_range,
/// sequence_too_long, invalid_request, no_tokenizer), 504 deadline_exceeded,
/// 409 cancelled, 503 worker_lost / no_workers / shutting_down, 500 otherwise.
api_error from_engine_error(messages::errc code, std::string message);

} // namespace canopy::server
