#pragma once
// Runs one workload under one variant (a fresh engine, or the bare backend) and measures
// it: time of the measured phase, tokens, batching, latency, memory and a sampled
// correctness check.
// Thread contract: run_variant blocks its calling thread; runs share nothing.

#include "bench/bench_workloads.hpp"

#include <canopy/cache/enum_names.hpp>
#include <canopy/engine_config.hpp>

#include <array>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace canopy::app {

enum class bench_variant {
  full,     // the config as given
  futures,  // the same, asked through engine futures (as hosts do) instead of callbacks
  no_cache, // cache_enabled=false
  no_kv,    // kv_reuse=false: every pass recomputes its whole sequence
  no_batching, // batch_size=1, merge_duplicates=false, flush_when_idle=true
  direct,      // the backend called directly, no actors (the overhead baseline)
  adapters,    // the config as given, the queries spread over its LoRA adapters
               // (workload_options::adapters says how)
};

inline constexpr std::array<enum_name<bench_variant>, 7> bench_variant_names{{
    {bench_variant::full, "full"},
    {bench_variant::futures, "futures"},
    {bench_variant::no_cache, "no-cache"},
    {bench_variant::no_kv, "no-kv"},
    {bench_variant::no_batching, "no-batching"},
    {bench_variant::direct, "direct"},
    {bench_variant::adapters, "adapters"},
}};

std::string_view to_string(bench_variant variant);

struct bench_result {
  workload_kind workload = workload_kind::smc;
  bench_variant variant = bench_variant::full;
  std::size_t remote_workers = 0; // the engine's workers reached over the network
                                  // (0: in-process)
  double seconds = 0;             // the measured phase
  std::uint64_t queries = 0;
  std::uint64_t tokens_requested = 0;
  std::uint64_t tokens_computed = 0;  // by the backend(s)
  std::uint64_t matmul_flops = 0;     // of the backends' passes (0: the mock)
  double compute_seconds = 0;         // the backends' time on those passes
  std::uint64_t unique_tokens = 0;    // distinct prefixes of the workload's queries
  std::uint64_t repeated_queries = 0; // queries repeating an earlier one exactly
  double mean_batch_size = 0;         // queries per pass; 0 when no pass ran
  double latency_p50_us = 0;
  double latency_p99_us = 0;
  double pass_round_trip_p50_us = 0; // a pass sent to a worker until its answer is back
  double pass_round_trip_p99_us = 0;
  std::uint64_t wire_bytes = 0;     // TCP bytes between the engine and remote workers
  std::uint64_t peak_rss_bytes = 0; // of the process during the measured phase
  std::uint64_t logprob_bytes = 0;  // the engine's cached rows at the end
  std::uint64_t kv_bytes = 0;       // the engine's KV, all workers, at the end
  std::uint64_t kv_peak_bytes = 0;  // the most KV each worker held, summed over workers
  std::uint64_t kv_bytes_per_token = 0; // of the model (0: direct)
  std::uint64_t step_weight_bytes = 0;  // what a decode step reads of the model's
                                        // weights (0: direct, the mock)
  std::int64_t kv_window = 0;           // the model's sliding window (0: none)
  std::uint64_t rows_checked = 0;
  std::uint64_t mismatches = 0;
  std::string first_mismatch;
  std::string engine_stats_json; // engine::stats() at the end; empty for direct
};

/// How often the bench checks an answer against its reference row: a prime, so that
/// the checked answers do not fall in step with the workloads' periods (particle
/// counts, sequence lengths).
constexpr std::size_t answer_check_period = 97;

/// Where the bench runs a backend of its own (the reference rows, the direct variant, the
/// profile and the tier probe): the engine's first device, so that its numbers and
/// rounding are the engine's; "cpu" for a front without devices.
std::string bench_device(const engine_config& config);

/// The model `config` names, described without loading its weights (vocabulary and
/// context shape the workloads).
backends::model_info configured_model(const engine_config& config);

/// Checks every `check_every`-th answer against the reference row. With remote_workers
/// in `config`, the engine drives them (a front with no device of its own when
/// `config.workers` is 0).
bench_result run_variant(workload_kind workload, const workload_options& options,
                         const engine_config& config, bench_variant variant,
                         std::size_t check_every);

} // namespace canopy::app
