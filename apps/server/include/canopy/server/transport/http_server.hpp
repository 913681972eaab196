#pragma once
// The HTTP/1.1 transport of `canopy serve` (Boost.Beast on Asio): keep-alive
// connections, each read with hard limits (header bytes, header and body time, body
// bytes checked from Content-Length before the body is read), bearer-token auth
// compared in constant time, and every complete request handed to a request_handler.
// A connection whose client goes away while its request is in flight has that
// request cancelled; one whose client stops reading its answer is closed after
// idle_timeout without progress. run() returns after stop() or SIGTERM/SIGINT: it stops
// accepting, lets in-flight requests finish and their answers be written, closes idle
// connections, then returns.
// Thread contract: construct and run() on one thread; stop() and port() from any.

#include <canopy/server/server_metrics.hpp>
#include <canopy/server/server_options.hpp>
#include <canopy/server/transport/http_message.hpp>

#include <cstdint>
#include <functional>
#include <memory>

namespace canopy::server {

class http_server {
public:
  /// Binds and listens at once (so port() is known before run()); throws
  /// std::runtime_error naming host and port when it cannot. A null `metrics`: the
  /// server counts into its own.
  http_server(server_options options, request_handler& handler,
              std::shared_ptr<server_metrics> metrics);
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// The port listened on (the chosen one when options.port was 0).
  std::uint16_t port() const;
  /// Serves until stop() or SIGTERM/SIGINT, then drains as described above.
  void run();
  /// Starts the same drain from any thread.
  void stop();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace canopy::server
