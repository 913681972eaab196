#pragma once
// What the HTTP transport and the API router exchange: a request read whole off a
// connection, the response to write back, and the handler interface the transport
// calls. The transport owns sockets, limits, timeouts, auth and keep-alive; the
// handler owns the API. Neither knows the other's internals.
// Thread contract: request_handler::handle and cancel are called on an I/O thread
// and must not block; `respond` may be called from any thread, at most once (the
// transport posts the write back to the connection's own executor).

#include <canopy/server/transport/body_stream.hpp>
#include <canopy/server/transport/byte_budget.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace canopy::server {

struct http_request {
  std::string method;       // "GET", "POST", ...
  std::string target;       // the request target as sent: "/v1/logprobs?x=1"
  std::string content_type; // the Content-Type header, "" when absent
  std::string accept;       // the Accept header, "" when absent
  std::string body;
  std::string tenant; // who asked: "" unless the server has several tokens, else
                      // the number of the caller's token (1 for the first line)
};

struct http_response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  /// Further headers, e.g. {"Allow", "POST"} on a 405 or {"Server-Timing", ...}.
  std::vector<std::pair<std::string, std::string>> headers;
  /// The bytes this response holds against a budget: the transport keeps it until the
  /// response is written (or its connection closes).
  std::shared_ptr<byte_reservation> reserved;
  /// Set: `body` is only the start; the rest comes through the stream, which the
  /// handler must end. The request stays in flight (a client that leaves cancels it)
  /// until the stream has ended and been written.
  std::shared_ptr<body_stream> stream;
  /// With a stream: its last piece when the server cuts it at the drain deadline (an
  /// error event, say), written whole before the body's proper end.
  std::string stream_cut;
};

using respond_fn = std::function<void(http_response)>;

/// Identifies an in-flight request to its handler (unique per transport).
using request_id = std::uint64_t;

class request_handler {
public:
  virtual ~request_handler() = default;
  /// Answers `request` through `respond`, now or later, on an I/O thread (no body) or
  /// a handler thread (a body). Authentication and the transport's size and time
  /// limits have already been enforced.
  virtual void handle(request_id id, http_request request, respond_fn respond) = 0;
  /// The client of request `id` went away before its answer: drop the work. A
  /// `respond` that still comes is ignored by the transport.
  virtual void cancel(request_id id) = 0;
};

} // namespace canopy::server
