#pragma once
// A request_handler for the transport's tests. In `echo` mode it answers at once with
// a JSON echo of what it was handed; in `hold` mode it keeps every respond callback for
// the test to call (from any thread, at any time). It records every call and cancel.
// Thread contract: any thread.

#include <canopy/server/transport/http_message.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <vector>

namespace canopy::server::testing {

class scripted_handler final : public request_handler {
public:
  enum class mode { echo, hold };

  struct call {
    request_id id = 0;
    http_request request;
    respond_fn respond; // empty in echo mode (already answered)
  };

  explicit scripted_handler(mode how = mode::echo) : mode_(how) {}

  /// The echo: {"id", "method", "target", "content_type", "accept", "body", "tenant"}
  /// with an extra header "X-Echo: yes".
  static http_response echo(request_id id, const http_request& request) {
    http_response response;
    response.body = nlohmann::json{{"id", id},
                                   {"method", request.method},
                                   {"target", request.target},
                                   {"content_type", request.content_type},
                                   {"accept", request.accept},
                                   {"body", request.body},
                                   {"tenant", request.tenant}}
                        .dump();
    response.headers.emplace_back("X-Echo", "yes");
    return response;
  }

  void handle(request_id id, http_request request, respond_fn respond) override {
    // An echo is recorded before it is sent: a test that has read the answer then finds
    // the call (recorded after, it was missing now and then under load).
    std::optional<http_response> answer;
    if (mode_ == mode::echo)
      answer = echo(id, request);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      calls_.push_back({id, std::move(request), answer ? nullptr : std::move(respond)});
      changed_.notify_all();
    }
    if (answer)
      respond(std::move(*answer));
  }

  void cancel(request_id id) override {
    std::lock_guard<std::mutex> lock(mutex_);
    cancelled_.push_back(id);
    changed_.notify_all();
  }

  /// The calls so far once there are at least `n`, or after `timeout` however many.
  std::vector<call> calls(std::size_t n,
                          std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, timeout, [&] { return calls_.size() >= n; });
    return calls_;
  }

  /// The cancelled ids so far once there are at least `n`, or after `timeout`.
  std::vector<request_id>
  cancelled(std::size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, timeout, [&] { return cancelled_.size() >= n; });
    return cancelled_;
  }

private:
  const mode mode_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<call> calls_;           // guarded by mutex_
  std::vector<request_id> cancelled_; // guarded by mutex_
};

} // namespace canopy::server::testing
