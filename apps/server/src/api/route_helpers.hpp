#pragma once
// What the API's routes share (private to api_router*.cpp): JSON answers, answering a
// gateway job's reply, and unpacking a parse.
// Thread contract: pure functions; a gateway_done runs on its gateway's thread.

#include <canopy/engine.hpp>
#include <canopy/server/api/api_requests.hpp>
#include <canopy/server/api/gateway_actor.hpp>
#include <canopy/server/transport/http_message.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <variant>

namespace canopy::server::detail {

inline std::string dump(const nlohmann::json& j) {
  // Text from the model (detokenized bytes) may not be UTF-8: replace, never throw.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

inline http_response json_response(const nlohmann::json& body) {
  http_response r;
  r.body = dump(body);
  return r;
}

/// Server-Timing lets a client tell the server's overhead from the engine's time.
inline void add_server_timing(http_response& r, double engine_ms) {
  char text[48];
  std::snprintf(text, sizeof text, "engine;dur=%.3f", engine_ms);
  r.headers.emplace_back("Server-Timing", text);
}

inline api_error engine_error(const canopy::error& e) {
  return from_engine_error(e.code(), e.message());
}

/// A job's `done`: answers the job's error, or what `encode` makes of its reply (with
/// Server-Timing). `done` runs on a gateway actor, which must not die of an exception
/// while encoding (out of memory): that becomes a 500.
template <class Encode> gateway_done answer_with(respond_fn respond, Encode encode) {
  return [respond = std::move(respond), encode = std::move(encode)](gateway_reply reply) {
    if (reply.error)
      return respond(to_response(*reply.error));
    http_response response;
    try {
      response = encode(reply);
    } catch (const std::exception& e) {
      return respond(to_response({500, "internal_error", e.what()}));
    }
    add_server_timing(response, reply.engine_ms);
    respond(std::move(response));
  };
}

/// Unpacks a parse: the request, or nullptr after answering its error.
template <class T> T* parsed_or_respond(parsed<T>& result, const respond_fn& respond) {
  if (auto* error = std::get_if<api_error>(&result)) {
    respond(to_response(*error));
    return nullptr;
  }
  return &std::get<T>(result);
}

} // namespace canopy::server::detail
