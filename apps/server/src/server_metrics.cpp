#include <canopy/server/server_metrics.hpp>

#include <canopy/server/api_paths.hpp>

namespace canopy::server {

server_metrics::server_metrics() : seconds_(bucket_histogram::latency_bounds()) {}

void server_metrics::connection_accepted() {
  accepted_.fetch_add(1, std::memory_order_relaxed);
  open_.fetch_add(1, std::memory_order_relaxed);
}

void server_metrics::connection_refused() {
  refused_.fetch_add(1, std::memory_order_relaxed);
}

void server_metrics::connection_closed() {
  open_.fetch_sub(1, std::memory_order_relaxed);
}

void server_metrics::request_cancelled() {
  cancelled_.fetch_add(1, std::memory_order_relaxed);
}

void server_metrics::request_done(std::string_view target, int status,
                                  std::chrono::nanoseconds took, std::size_t body_in,
                                  std::size_t body_out) {
  in_.fetch_add(body_in, std::memory_order_relaxed);
  out_.fetch_add(body_out, std::memory_order_relaxed);
  seconds_.observe(std::chrono::duration<double>(took).count());
  std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[{route_label(target), status}];
}

server_stats server_metrics::snapshot() const {
  server_stats stats;
  stats.connections_open = open_.load(std::memory_order_relaxed);
  stats.connections_accepted = accepted_.load(std::memory_order_relaxed);
  stats.connections_refused = refused_.load(std::memory_order_relaxed);
  stats.request_seconds = seconds_.snapshot();
  stats.bytes_received = in_.load(std::memory_order_relaxed);
  stats.bytes_sent = out_.load(std::memory_order_relaxed);
  stats.cancelled_requests = cancelled_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mutex_);
  stats.requests.assign(requests_.begin(), requests_.end());
  for (const auto& w : budgets_)
    stats.budgets.push_back({w.name, w.unit, w.budget->used(), w.budget->limit()});
  return stats;
}

void server_metrics::watch_budget(std::string name, std::string unit,
                                  std::shared_ptr<const byte_budget> budget) {
  std::lock_guard<std::mutex> lock(mutex_);
  budgets_.push_back({std::move(name), std::move(unit), std::move(budget)});
}

std::string server_metrics::route_label(std::string_view target) {
  const auto path = target.substr(0, target.find('?'));
  if (is_page_path(path))
    return "/web";
  return std::string(is_api_path(path) ? path : "other");
}

} // namespace canopy::server
