#pragma once
// A shared byte budget: the memory that clients make the server hold (request bodies
// being read, answers being computed and written) is reserved against it first, so a
// flood of clients is refused instead of growing the process. A reservation gives its
// bytes back when destroyed.
// Thread contract: byte_budget is safe from any number of threads at once; one
// reservation is used by one thread at a time (it may move between threads).

#include <atomic>
#include <cstddef>
#include <memory>

namespace canopy::server {

class byte_budget;

/// Bytes held against a budget until destroyed (or reset). Move-only.
class byte_reservation {
public:
  byte_reservation() = default;
  byte_reservation(byte_reservation&& other) noexcept;
  byte_reservation& operator=(byte_reservation&& other) noexcept;
  ~byte_reservation();

  /// Holds `bytes` in all (more or fewer than now); false, holding what it held, when
  /// the budget has no room for the growth.
  bool resize(std::size_t bytes);
  void reset() { resize(0); }
  std::size_t bytes() const { return bytes_; }

private:
  friend class byte_budget;
  explicit byte_reservation(std::shared_ptr<byte_budget> budget)
      : budget_(std::move(budget)) {}
  std::shared_ptr<byte_budget> budget_;
  std::size_t bytes_ = 0;
};

class byte_budget : public std::enable_shared_from_this<byte_budget> {
public:
  explicit byte_budget(std::size_t limit) : limit_(limit) {}

  /// An empty reservation to grow with resize(); it keeps the budget alive.
  byte_reservation reservation() { return byte_reservation(shared_from_this()); }
  std::size_t limit() const { return limit_; }
  std::size_t used() const { return used_.load(std::memory_order_relaxed); }

private:
  friend class byte_reservation;
  bool take(std::size_t bytes);
  void give(std::size_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }

  const std::size_t limit_;
  std::atomic<std::size_t> used_{0};
};

} // namespace canopy::server
