#pragma once
// The transport's own counters, exported on /metrics beside the engine's.
// Thread contract: every member function from any thread.

#include <canopy/bucket_histogram.hpp>
#include <canopy/engine_stats.hpp>
#include <canopy/server/transport/byte_budget.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace canopy::server {

/// What one of the server's budgets holds now (server_metrics::watch_budget).
struct budget_use {
  std::string name; // "answers", "bodies", "generation"
  std::string unit; // "bytes", "tokens"
  std::uint64_t used = 0;
  std::uint64_t limit = 0;
};

struct server_stats {
  std::uint64_t connections_open = 0;
  std::uint64_t connections_accepted = 0; // since start
  std::uint64_t connections_refused = 0;  // over max_connections
  /// Requests answered, by (route, status). Route is the API path for known routes,
  /// "other" for anything else (so a scanner cannot grow the label set).
  std::vector<std::pair<std::pair<std::string, int>, std::uint64_t>> requests;
  histogram_snapshot request_seconds;   // request read whole to response written
  std::uint64_t bytes_received = 0;     // request bodies
  std::uint64_t bytes_sent = 0;         // response bodies
  std::uint64_t cancelled_requests = 0; // client left before its answer
  std::vector<budget_use> budgets;      // as they stand at the snapshot
};

class server_metrics {
public:
  server_metrics();
  void connection_accepted();
  void connection_refused();
  void connection_closed();
  void request_cancelled();
  /// A response was written for a request to `target` (the query string is ignored).
  void request_done(std::string_view target, int status, std::chrono::nanoseconds took,
                    std::size_t body_in, std::size_t body_out);
  /// Reports `budget` (counting `unit`s) under `name` in every snapshot from now on.
  void watch_budget(std::string name, std::string unit,
                    std::shared_ptr<const byte_budget> budget);
  server_stats snapshot() const;

  /// The label /metrics uses for a request target.
  static std::string route_label(std::string_view target);

private:
  std::atomic<std::uint64_t> open_{0}, accepted_{0}, refused_{0}, in_{0}, out_{0},
      cancelled_{0};
  bucket_histogram seconds_;
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_; // guarded by mutex_
  struct watched {
    std::string name, unit;
    std::shared_ptr<const byte_budget> budget;
  };
  std::vector<watched> budgets_; // guarded by mutex_
};

} // namespace canopy::server
