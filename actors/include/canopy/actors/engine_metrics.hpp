#pragma once
// The counters every actor of one engine updates, shared by pointer. Relaxed atomics:
// each counter is exact; a snapshot across counters is not a single instant. Labels
// (a worker's node and device, a node's state) sit behind mutexes: they change when
// workers come and go, never per query.
// Thread contract: any thread.

#include <canopy/backends/backend.hpp>
#include <canopy/bucket_histogram.hpp>
#include <canopy/cache/enum_names.hpp>
#include <canopy/cache/token_trie.hpp>
#include <canopy/engine_stats.hpp>
#include <canopy/messages/errors.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

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

enum class worker_status : std::uint8_t { active, draining, lost };

inline constexpr std::array<enum_name<worker_status>, 3> worker_status_names{{
    {worker_status::active, "active"},
    {worker_status::draining, "draining"},
    {worker_status::lost, "lost"},
}};
std::string_view to_string(worker_status state);

/// One worker's figures. The batcher writes passes, tokens, in flight, losses and
/// re-dispatched queries; the cache the KV bytes and the budget it enforces; a remote
/// worker's link its last heartbeat.
struct worker_metrics {
  std::atomic<std::uint64_t> passes{0}, tokens_computed{0}, in_flight{0}, losses{0},
      redispatched{0}, kv_bytes{0}, kv_peak_bytes{0}, kv_budget_bytes{0},
      kv_host_bytes{0}, kv_host_budget_bytes{0};
  std::atomic<std::int64_t> last_heartbeat_ns{0}; // system clock; 0: none (in-process)
  std::atomic<worker_status> state{worker_status::active};
};

/// One remote worker node (an entry of remote_workers), written by its link.
struct node_metrics {
  explicit node_metrics(std::string node_address) : address(std::move(node_address)) {}
  const std::string address;
  std::atomic<std::uint64_t> admissions{0}, losses{0};
  std::atomic<std::int64_t> last_heartbeat_ns{0}; // system clock; 0: none yet

  void set_state(std::string state, std::string last_error = {});
  std::pair<std::string, std::string> state() const; // (state, last error)

private:
  mutable std::mutex mutex_;
  std::string state_ = "connecting", last_error_;
};

/// The time now as worker_metrics::last_heartbeat_ns counts it.
std::int64_t heartbeat_clock_ns();

/// One of the trie's counters the engine reports: its field in the trie's statistics and
/// in engine_stats. The table below names each once; the cache actor publishes them and
/// snapshot() reads them back by it.
struct cache_counter {
  std::uint64_t cache::trie_stats::*in_trie;
  std::uint64_t engine_stats::*in_stats;
};

inline constexpr std::array<cache_counter, 12> cache_counters{{
    {&cache::trie_stats::logprob_evictions, &engine_stats::logprob_evictions},
    {&cache::trie_stats::kv_evictions, &engine_stats::kv_evictions},
    {&cache::trie_stats::kv_demotions, &engine_stats::kv_demotions},
    {&cache::trie_stats::kv_demoted_bytes, &engine_stats::kv_demoted_bytes},
    {&cache::trie_stats::kv_promotions, &engine_stats::kv_promotions},
    {&cache::trie_stats::kv_promoted_bytes, &engine_stats::kv_promoted_bytes},
    {&cache::trie_stats::nodes_removed, &engine_stats::nodes_removed},
    {&cache::trie_stats::locked_nodes, &engine_stats::locked_nodes},
    {&cache::trie_stats::refused_attaches, &engine_stats::refused_attaches},
    {&cache::trie_stats::logprob_entries, &engine_stats::logprob_entries},
    {&cache::trie_stats::logprob_bytes, &engine_stats::logprob_bytes},
    {&cache::trie_stats::row_extras, &engine_stats::next_byte_masses_kept},
}};

/// The place of engine_stats' `field` among cache_counters (a compile error when it is
/// none of them, where it is used as a constant).
constexpr std::size_t cache_counter_index(std::uint64_t engine_stats::*field) {
  for (std::size_t i = 0; i < cache_counters.size(); ++i)
    if (cache_counters[i].in_stats == field)
      return i;
  throw std::invalid_argument("not a cache counter");
}

struct engine_metrics {
  /// `nodes`: the remote worker nodes' addresses, in remote_workers order.
  explicit engine_metrics(const std::vector<std::string>& nodes = {});

  /// Workers one engine can hold (slots are never reused by another worker).
  static constexpr std::uint32_t max_workers = 256;

  std::atomic<std::uint64_t> queries{0}, answered{0}, failed{0}, cache_hits{0},
      merged_duplicates{0}, batches{0}, batched_queries{0}, deferred{0}, failed_passes{0},
      tokens_requested{0}, tokens_computed{0}, matmul_flops{0}, compute_ns{0},
      next_byte_queries{0}, next_byte_masses_made{0};
  // Written by the cache actor after each operation that changes them (its trie's
  // accounting): [cache_counters].
  std::array<std::atomic<std::uint64_t>, cache_counters.size()> cache_counts{};
  latency_histogram latency;
  latency_histogram pass_round_trip; // a pass sent to a worker until its answer is back
  // Gauge written by the batcher. (Queries in flight need none: every query counts
  // in `queries` when accepted or rejected, and in `answered` or `failed` once.)
  std::atomic<std::uint64_t> queue_depth{0};
  std::array<std::atomic<std::uint64_t>, 32> errors_by_code{}; // [errc]
  bucket_histogram latency_seconds{bucket_histogram::latency_bounds()};
  bucket_histogram batch_size{bucket_histogram::size_bounds()};

  engine_stats snapshot() const;
  /// The cache counter engine_stats calls `field`.
  template <std::uint64_t engine_stats::*field>
  std::atomic<std::uint64_t>& cache_count() {
    constexpr auto index = cache_counter_index(field); // evaluated while compiling
    return cache_counts[index];
  }
  /// Copies the trie's counters and its workers' KV bytes (the cache actor, after each
  /// change).
  void publish(const cache::trie_stats& stats);
  /// Counts what a finished pass on `worker` computed.
  void count_pass(std::uint32_t worker, std::uint64_t tokens, std::uint64_t matmul_flops,
                  std::uint64_t compute_ns);
  /// A worker took slot `id` (< max_workers): its labels, and it is active.
  void worker_joined(std::uint32_t id, std::string node, std::string device);
  worker_metrics& worker(std::uint32_t id) { return workers_[id]; }
  /// "" without remote nodes; else " (remote workers: ADDRESS STATE: LAST ERROR; ...)",
  /// for the errors of queries no worker can take.
  std::string remote_nodes_summary() const;
  node_metrics& node(std::size_t index) { return nodes_[index]; }
  /// Counts a query answered with an error (codes outside Canopy's count as
  /// backend_failure, as the API reports them).
  void count_error(messages::errc code);

private:
  std::array<worker_metrics, max_workers> workers_;
  std::atomic<std::uint32_t> worker_count_{0};
  mutable std::mutex labels_mutex_;
  std::vector<std::pair<std::string, std::string>>
      worker_labels_;              // [workers] node, device
  std::deque<node_metrics> nodes_; // fixed at construction
};

inline void bump(std::atomic<std::uint64_t>& counter, std::uint64_t n = 1) {
  counter.fetch_add(n, std::memory_order_relaxed);
}

} // namespace canopy::actors
