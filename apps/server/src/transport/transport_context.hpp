#pragma once
// What every connection of one http_server shares. Owned by the server, which
// destroys its io_context (and with it every connection) before this.
// Thread contract: members are read-only or thread-safe themselves; any thread.

#include "transport/connection_registry.hpp"
#include "transport/post_gate.hpp"

#include <canopy/server/server_metrics.hpp>
#include <canopy/server/server_options.hpp>
#include <canopy/server/transport/http_message.hpp>

#include <boost/asio/thread_pool.hpp>

#include <algorithm>
#include <atomic>
#include <memory>
#include <utility>

namespace canopy::server {

struct transport_context {
  transport_context(server_options options, request_handler& handler,
                    std::shared_ptr<server_metrics> metrics)
      : options(std::move(options)), handler(handler), metrics(std::move(metrics)) {}

  const server_options options;
  request_handler& handler;
  const std::shared_ptr<server_metrics> metrics;
  /// Shared with every respond callback, which may outlive the server.
  const std::shared_ptr<post_gate> gate = std::make_shared<post_gate>();
  /// Request bodies being read, all connections (server_options::body_budget_bytes).
  const std::shared_ptr<byte_budget> bodies =
      std::make_shared<byte_budget>(options.body_budget_bytes);
  connection_registry connections;
  std::atomic<request_id> next_id{1};
  /// Runs the handler for requests with a body (parsing, tokenizing), so that no body
  /// holds an I/O thread; joined by the server before anything here goes.
  boost::asio::thread_pool handlers{std::max<std::uint32_t>(1, options.handler_threads)};
};

} // namespace canopy::server
