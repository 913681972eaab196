#include <canopy/bucket_histogram.hpp>

#include <algorithm>
#include <cmath>

namespace canopy {

bucket_histogram::bucket_histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)),
      counts_(new std::atomic<std::uint64_t>[bounds_.size() + 1]) {
  for (std::size_t i = 0; i <= bounds_.size(); ++i)
    counts_[i] = 0;
}

void bucket_histogram::observe(double value) {
  auto bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_micros_.fetch_add(
      static_cast<std::uint64_t>(std::llround(std::max(0.0, value) * 1e6)),
      std::memory_order_relaxed);
}

histogram_snapshot bucket_histogram::snapshot() const {
  histogram_snapshot s;
  s.upper_bounds = bounds_;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    s.counts.push_back(counts_[i].load(std::memory_order_relaxed));
    s.count += s.counts.back();
  }
  s.sum = double(sum_micros_.load(std::memory_order_relaxed)) * 1e-6;
  return s;
}

std::vector<double> bucket_histogram::latency_bounds() {
  return {25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3,
          25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1.0,  2.5,    5.0,  10.0};
}

std::vector<double> bucket_histogram::size_bounds() {
  std::vector<double> bounds;
  for (double b = 1; b <= 1024; b *= 2)
    bounds.push_back(b);
  return bounds;
}

} // namespace canopy
