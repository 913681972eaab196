#include "bench/in_flight.hpp"

namespace canopy::app {

std::size_t in_flight::started() {
  std::lock_guard<std::mutex> lock(mutex_);
  return ++count_;
}

void in_flight::succeeded() {
  std::lock_guard<std::mutex> lock(mutex_);
  finish();
}

void in_flight::failed(const canopy::error& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!error_)
    error_ = error;
  finish();
}

void in_flight::finish() {
  // Notified under the lock: the waiter may destroy this object as soon as it sees the
  // count drop, so an answering thread must not touch it after unlocking.
  if (--count_ <= wake_at_)
    drained_.notify_one();
}

void in_flight::wait_until_at_most(std::size_t count) {
  std::unique_lock<std::mutex> lock(mutex_);
  wake_at_ = count;
  drained_.wait(lock, [&] { return count_ <= count; });
}

void in_flight::wait_all() {
  wait_until_at_most(0);
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_)
    throw *error_;
}

} // namespace canopy::app
