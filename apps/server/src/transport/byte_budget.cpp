#include <canopy/server/transport/byte_budget.hpp>

#include <utility>

namespace canopy::server {

bool byte_budget::take(std::size_t bytes) {
  auto used = used_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit_ - used)
      return false;
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return true;
}

byte_reservation::byte_reservation(byte_reservation&& other) noexcept
    : budget_(std::move(other.budget_)), bytes_(std::exchange(other.bytes_, 0)) {}

byte_reservation& byte_reservation::operator=(byte_reservation&& other) noexcept {
  if (this != &other) {
    reset();
    budget_ = std::move(other.budget_);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

byte_reservation::~byte_reservation() {
  reset();
}

bool byte_reservation::resize(std::size_t bytes) {
  if (!budget_ || bytes == bytes_)
    return bytes == bytes_;
  if (bytes < bytes_) {
    budget_->give(bytes_ - bytes);
  } else if (!budget_->take(bytes - bytes_)) {
    return false;
  }
  bytes_ = bytes;
  return true;
}

} // namespace canopy::server
