#pragma once
// Counts a workload's queries in flight, lets the issuing thread wait for them to
// drain, and keeps the first error among their answers.
// Thread contract: started() and the waits from the issuing thread; succeeded() and
// failed() from any thread (the engine calls them from its callbacks).

#include <canopy/error.hpp>

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>

namespace canopy::app {

class in_flight {
public:
  /// Counts one more query; returns how many are now in flight.
  std::size_t started();
  void succeeded();
  void failed(const canopy::error& error);
  /// Blocks until at most `count` queries are in flight.
  void wait_until_at_most(std::size_t count);
  /// Blocks until every query is answered; then throws the first error any got.
  void wait_all();

private:
  void finish(); // with mutex_ held

  std::mutex mutex_;
  std::condition_variable drained_;
  std::size_t count_ = 0;
  std::size_t wake_at_ = 0; // the waiter's threshold: answers above it wake nobody
  std::optional<canopy::error> error_;
};

} // namespace canopy::app
