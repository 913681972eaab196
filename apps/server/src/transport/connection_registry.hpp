#pragma once
// The open connections of one http_server: counted for max_connections and visited
// when the server drains. A connection adds itself when it starts and removes itself
// when destroyed, so the count covers every connection still holding a socket.
// Thread contract: any thread.

#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace canopy::server {

class http_session;

class connection_registry {
public:
  void add(const std::shared_ptr<http_session>& session);
  void remove(const http_session* session);
  std::size_t size() const;
  /// The connections not yet destroyed.
  std::vector<std::shared_ptr<http_session>> live() const;

private:
  mutable std::mutex mutex_;
  std::unordered_map<const http_session*, std::weak_ptr<http_session>>
      sessions_; // guarded by mutex_
};

} // namespace canopy::server
