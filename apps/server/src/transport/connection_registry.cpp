#include "transport/connection_registry.hpp"

namespace canopy::server {

void connection_registry::add(const std::shared_ptr<http_session>& session) {
  std::lock_guard<std::mutex> lock(mutex_);
  sessions_.emplace(session.get(), session);
}

void connection_registry::remove(const http_session* session) {
  std::lock_guard<std::mutex> lock(mutex_);
  sessions_.erase(session);
}

std::size_t connection_registry::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sessions_.size();
}

std::vector<std::shared_ptr<http_session>> connection_registry::live() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::shared_ptr<http_session>> result;
  result.reserve(sessions_.size());
  for (const auto& [key, weak] : sessions_)
    if (auto session = weak.lock())
      result.push_back(std::move(session));
  return result;
}

} // namespace canopy::server
