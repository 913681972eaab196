#pragma once
// A snapshot of an engine's counters (engine::stats()).
// Thread contract: plain value.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace canopy {

/// A histogram as Prometheus reports it.
struct histogram_snapshot {
  std::vector<double> upper_bounds;  // ascending; an implicit last bucket is +Inf
  std::vector<std::uint64_t> counts; // [upper_bounds + 1] per bucket, NOT cumulative
  double sum = 0;                    // of the observed values
  std::uint64_t count = 0;           // observations
};

/// One worker of the engine, in-process or remote.
struct worker_stats {
  std::uint32_t id = 0; // its slot (the index of kv_bytes)
  std::string node;     // "local", or the "host:port" it was reached at
  std::string device;
  std::string state; // active | draining | lost
  std::uint64_t passes = 0;
  std::uint64_t tokens_computed = 0;
  std::uint64_t in_flight = 0;            // passes sent and not back
  double heartbeat_age_ms = -1;           // since its node last answered; -1: in-process
  std::uint64_t losses = 0;               // times it was lost
  std::uint64_t redispatched_queries = 0; // queries of its passes sent to other workers
  std::uint64_t kv_bytes = 0;
  std::uint64_t kv_peak_bytes = 0;        // the most KV it has held at once
  std::uint64_t kv_budget_bytes = 0;      // the budget the cache enforces on it
  std::uint64_t kv_host_bytes = 0;        // KV moved to its host tier (not in kv_bytes)
  std::uint64_t kv_host_budget_bytes = 0; // 0: no host tier
};

/// One remote worker node (remote_workers).
struct node_stats {
  std::string address;
  std::string state;      // connecting | admitted | refused | lost | unreachable
  std::string last_error; // why it was refused, lost or not reached
  std::uint64_t admissions = 0;
  std::uint64_t losses = 0;
  double heartbeat_age_ms = -1; // -1: never answered
};

struct engine_stats {
  std::uint64_t queries = 0;           // accepted or rejected calls
  std::uint64_t answered = 0;          // answered with log-probs
  std::uint64_t failed = 0;            // answered with an error
  std::uint64_t cache_hits = 0;        // answered from stored rows
  std::uint64_t merged_duplicates = 0; // joined an equal waiting or in-flight query
  std::uint64_t batches = 0;           // passes run
  std::uint64_t batched_queries = 0;   // distinct queries those passes answered
  double mean_batch_size = 0;          // batched_queries / batches
  std::uint64_t deferred = 0;          // queries moved to a later pass to reuse its KV
  std::uint64_t failed_passes = 0;
  std::uint64_t tokens_requested = 0; // sum of accepted query lengths
  std::uint64_t tokens_computed = 0;  // tokens the backends were asked to compute
  std::uint64_t matmul_flops = 0;     // FLOPs of the passes' matrix products
  double compute_seconds = 0;         // time the backends spent on passes
  std::uint64_t logprob_evictions = 0;
  std::uint64_t kv_evictions = 0; // KV dropped for good (from a device or a host tier)
  std::uint64_t kv_demotions = 0; // KV entries moved from a device to its host tier
  std::uint64_t kv_demoted_bytes = 0;
  std::uint64_t kv_promotions = 0; // KV entries moved back to the device for a pass
  std::uint64_t kv_promoted_bytes = 0;
  std::uint64_t nodes_removed = 0;
  std::uint64_t refused_attaches = 0; // rows or KV not stored for lack of room
  std::uint64_t logprob_entries = 0;
  std::uint64_t next_byte_queries = 0;     // next-byte calls (also in queries)
  std::uint64_t next_byte_masses_made = 0; // ... that found no masses beside their row
  std::uint64_t next_byte_masses_kept = 0; // rows with next-byte masses beside them
  std::uint64_t locked_nodes = 0;  // trie nodes held by waiting or computing queries
                                   // (0 once every query is answered)
  std::uint64_t logprob_bytes = 0; // rows and the masses beside them
  std::uint64_t logprob_budget_bytes = 0;
  std::vector<std::uint64_t> kv_bytes; // [workers]
  std::vector<worker_stats> workers;   // [workers]
  std::vector<node_stats> nodes;       // [remote_workers]
  double latency_p50_us = 0;           // accepted query to answer
  double latency_p90_us = 0;
  double latency_p99_us = 0;
  double pass_round_trip_p50_us = 0; // a pass sent to a worker until its answer is back
  double pass_round_trip_p99_us = 0;
  histogram_snapshot latency_seconds; // accepted query to answer, answered or failed
  histogram_snapshot batch_size;      // distinct queries per pass
  /// Failed answers by error code name (empty_sequence, cancelled, ...); codes that
  /// never failed a query are left out.
  std::vector<std::pair<std::string, std::uint64_t>> errors_by_code;
  std::uint64_t queue_depth = 0; // distinct queries waiting in the batcher
  std::uint64_t in_flight = 0;   // accepted queries not answered yet

  std::string to_json() const;
};

} // namespace canopy
