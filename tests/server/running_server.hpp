#pragma once
// An http_server on a free loopback port, run() on a background thread. The
// destructor stops it and fails the test (aborting, rather than hanging) when run()
// does not return.
// Thread contract: construct, destroy and wait_stopped on the test's thread; port(),
// stop() and metrics() from any.

#include <canopy/server/transport/http_server.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <thread>

namespace canopy::server::testing {

/// Options for tests: port 0, two I/O threads, and timeouts long enough never to
/// fire unless a test shortens the one it is about.
inline server_options test_options() {
  server_options options;
  options.port = 0;
  options.io_threads = 2;
  options.header_timeout = std::chrono::seconds(10);
  options.body_timeout = std::chrono::seconds(10);
  options.idle_timeout = std::chrono::seconds(10);
  options.drain_timeout = std::chrono::seconds(5); // within the destructor's patience
  return options;
}

class running_server {
public:
  running_server(server_options options, request_handler& handler)
      : metrics_(std::make_shared<server_metrics>()),
        server_(std::move(options), handler, metrics_) {
    auto ran = std::make_shared<std::promise<void>>();
    stopped_ = ran->get_future();
    thread_ = std::thread([this, ran] {
      server_.run();
      ran->set_value();
    });
  }

  ~running_server() {
    server_.stop();
    if (!wait_stopped(std::chrono::seconds(10))) {
      std::fprintf(stderr, "http_server::run() did not return after stop()\n");
      std::abort();
    }
    thread_.join();
  }

  running_server(const running_server&) = delete;
  running_server& operator=(const running_server&) = delete;

  std::uint16_t port() const { return server_.port(); }
  void stop() { server_.stop(); }
  server_metrics& metrics() { return *metrics_; }
  /// True when run() has returned within `timeout`.
  bool wait_stopped(std::chrono::milliseconds timeout) {
    return stopped_.wait_for(timeout) == std::future_status::ready;
  }

private:
  std::shared_ptr<server_metrics> metrics_;
  http_server server_;
  std::future<void> stopped_;
  std::thread thread_;
};

} // namespace canopy::server::testing
