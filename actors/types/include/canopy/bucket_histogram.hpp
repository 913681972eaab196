#pragma once
// A fixed-bucket histogram for metrics export (Prometheus wants cumulative counts at
// fixed upper bounds, which the log-linear latency_histogram does not give exactly).
// Thread contract: observe() and snapshot() from any thread (relaxed atomics: each
// count is exact, a snapshot across buckets is not a single instant).

#include <canopy/engine_stats.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace canopy {

class bucket_histogram {
public:
  /// `upper_bounds` ascending; values above the last land in the +Inf bucket.
  explicit bucket_histogram(std::vector<double> upper_bounds);
  void observe(double value);
  histogram_snapshot snapshot() const;

  /// Seconds from 25 µs to 10 s, about three buckets per decade.
  static std::vector<double> latency_bounds();
  /// 1, 2, 4, ... 1024.
  static std::vector<double> size_bounds();

private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> counts_; // [bounds + 1]
  std::atomic<std::uint64_t> sum_micros_{0}; // sum in millionths, so it stays atomic
};

} // namespace canopy
