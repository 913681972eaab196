#pragma once
// A steady timer whose pending wait is superseded by the next arm() or disarm(). A
// wait that already expired but whose handler has not run yet cannot be cancelled by
// steady_timer::cancel(); a generation count makes its handler do nothing instead.
// Thread contract: the owner's strand (the timer's executor).

#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <utility>

namespace canopy::server {

template <class Executor> class expiry_timer {
public:
  explicit expiry_timer(const Executor& executor) : timer_(executor) {}

  /// Calls `on_expiry` after `after` unless re-armed or disarmed first. `on_expiry`
  /// must keep the timer's owner alive (hold a shared_ptr to it): the wait refers to
  /// this timer.
  template <class Handler>
  void arm(std::chrono::steady_clock::duration after, Handler on_expiry) {
    auto generation = ++generation_;
    timer_.expires_after(after);
    timer_.async_wait([this, generation, on_expiry = std::move(on_expiry)](
                          const boost::system::error_code& ec) mutable {
      if (!ec && generation == generation_)
        on_expiry();
    });
  }

  void disarm() {
    ++generation_;
    timer_.cancel();
  }

private:
  typename boost::asio::steady_timer::rebind_executor<Executor>::other timer_;
  std::uint64_t generation_ = 0;
};

} // namespace canopy::server
