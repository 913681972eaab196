#include <canopy/server/api_error.hpp>

#include <nlohmann/json.hpp>

namespace canopy::server {

namespace {

/// OpenAI's error types by status, so its clients raise the matching exception.
const char* openai_type(int status) {
  if (status == 401)
    return "authentication_error";
  if (status == 404)
    return "not_found_error";
  if (status >= 500)
    return "server_error";
  return "invalid_request_error";
}

} // namespace

http_response to_response(const api_error& error) {
  http_response response;
  response.status = error.status;
  nlohmann::json body = {{"error",
                          {{"code", error.code},
                           {"message", error.message},
                           {"type", openai_type(error.status)},
                           {"param", nullptr}}}};
  // Messages may quote client bytes that are not UTF-8: replace, never throw.
  response.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return response;
}

http_response budget_full(const byte_budget& budget, std::size_t needed,
                          std::string_view holders, std::string_view flag,
                          std::string_view unit) {
  auto busy =
      to_response({503, "server_busy",
                   std::string(holders) + " hold " + std::to_string(budget.used()) +
                       " of " + std::to_string(budget.limit()) + " " + std::string(unit) +
                       " (" + std::string(flag) + "), too many for this one's " +
                       std::to_string(needed) + "; retry later"});
  busy.headers.emplace_back("Retry-After", "1");
  return busy;
}

api_error from_engine_error(messages::errc code, std::string message) {
  using messages::errc;
  int status = 500;
  switch (code) {
  case errc::empty_sequence:
  case errc::token_out_of_range:
  case errc::sequence_too_long:
  case errc::invalid_request:
  case errc::no_tokenizer:
    status = 400;
    break;
  case errc::unknown_adapter:
    status = 404;
    break;
  case errc::deadline_exceeded:
    status = 504;
    break;
  case errc::cancelled:
    status = 409;
    break;
  case errc::worker_lost:
  case errc::no_workers:
  case errc::shutting_down:
    status = 503;
    break;
  default:
    break;
  }
  return {status, std::string(messages::to_string(code)), std::move(message)};
}

} // namespace canopy::server
