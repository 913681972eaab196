#pragma once
// The counters every actor of one engine updates, shared by pointer. Relaxed atomics:
// each counter is exact; a snapshot across counters is not a single instant.
// Thread contract: any thread.

#include <canopy/actors/bucket_histogram.hpp>
#include <canopy/backends/backend.hpp>
#include <canopy/messages/errors.hpp>
#include <canopy/engine_stats.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

namespace canopy::actors {

/// Log-linear latency histogram: 8 buckets per power of two of nanoseconds, so a
/// percentile is within 9% of the truth.
class latency_histogram {
public:
  void record(std::chrono::nanoseconds latency);
  /// The upper bound of the bucket holding the p-quantile (0 < p <= 1), in µs.
  double percentile_us(double p) const;

private:
  static constexpr int sub_buckets = 8;
  static constexpr int buckets = 64 * sub_buckets;
  static int bucket_of(std::uint64_t ns);
  static double upper_bound_ns(int bucket);
  std::array<std::atomic<std::uint64_t>, buckets> counts_{};
};

struct engine_metrics {
  explicit engine_metrics(std::uint32_t workers);

  std::atomic<std::uint64_t> queries{0}, answered{0}, failed{0}, cache_hits{0},
    merged_duplicates{0}, batches{0}, batched_queries{0}, deferred{0}, failed_passes{0},
    tokens_requested{0}, tokens_computed{0}, matmul_flops{0}, compute_ns{0};
  // Written by the cache actor after each operation that changes them (its trie's
  // accounting).
  std::atomic<std::uint64_t> logprob_evictions{0}, kv_evictions{0}, nodes_removed{0},
    refused_attaches{0}, logprob_entries{0}, logprob_bytes{0}, locked_nodes{0};
  std::unique_ptr<std::atomic<std::uint64_t>[]> kv_bytes; // [workers]
  std::uint32_t workers;
  latency_histogram latency;
  // Gauge written by the batcher. (Queries in flight need none: every query counts
  // in `queries` when accepted or rejected, and in `answered` or `failed` once.)
  std::atomic<std::uint64_t> queue_depth{0};
  std::array<std::atomic<std::uint64_t>, 32> errors_by_code{}; // [errc]
  bucket_histogram latency_seconds{bucket_histogram::latency_bounds()};
  bucket_histogram batch_size{bucket_histogram::size_bounds()};

  engine_stats snapshot() const;
  /// Counts what a finished pass computed.
  void count_pass(const backends::pass_result& result);
  /// Counts a query answered with an error (codes outside Canopy's count as
  /// backend_failure, as the API reports them).
  void count_error(messages::errc code);
};

inline void bump(std::atomic<std::uint64_t>& counter, std::uint64_t n = 1) {
  counter.fetch_add(n, std::memory_order_relaxed);
}

} // namespace canopy::actors
