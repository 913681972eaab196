#pragma once
// One pending timer for the earliest of many deadlines (batch windows, passes, query
// deadlines), instead of one CAF timer per deadline: those pile up by the thousand
// per second under load, each held until its time. The owner keeps its deadlines;
// when the timer's message arrives it handles every deadline that passed and arms
// again for the earliest one left.
// Thread contract: part of one actor's state, touched only by that actor.

#include <caf/actor_clock.hpp>

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

namespace canopy::actors {

class earliest_timer {
public:
  using time_point = caf::actor_clock::time_point;

  /// Has `msg...` sent to `self` at `due`, unless the armed timer fires by then. A
  /// timer armed for later stays pending and finds less to do when it comes: the
  /// deadlines decide, not the timers.
  template <class Self, class... Ts> void arm(Self* self, time_point due, Ts&&... msg) {
    if (armed_ && *armed_ <= due)
      return;
    armed_ = due;
    auto delay =
        std::max(caf::timespan{0},
                 std::chrono::duration_cast<caf::timespan>(due - self->clock().now()));
    self->delayed_send(self, delay, std::forward<Ts>(msg)...);
  }

  /// Call when the timer's message arrives: the armed timer is spent once its time
  /// has come.
  void fired(time_point now) {
    if (armed_ && *armed_ <= now)
      armed_.reset();
  }

private:
  std::optional<time_point> armed_; // when the armed timer fires
};

} // namespace canopy::actors
