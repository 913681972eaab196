#include <canopy/actors/engine_metrics.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace canopy::actors {

int latency_histogram::bucket_of(std::uint64_t ns) {
  if (ns < sub_buckets)
    return static_cast<int>(ns);
  int octave = 63 - __builtin_clzll(ns); // ns >= 8, so octave >= 3
  int sub = static_cast<int>((ns >> (octave - 3)) & (sub_buckets - 1));
  int bucket = (octave - 2) * sub_buckets + sub;
  return bucket < buckets ? bucket : buckets - 1;
}

double latency_histogram::upper_bound_ns(int bucket) {
  if (bucket < sub_buckets)
    return bucket + 1;
  int octave = bucket / sub_buckets + 2;
  int sub = bucket % sub_buckets;
  return std::ldexp(1.0 + (sub + 1) / double(sub_buckets), octave);
}

void latency_histogram::record(std::chrono::nanoseconds latency) {
  auto ns = static_cast<std::uint64_t>(std::max<std::int64_t>(0, latency.count()));
  counts_[bucket_of(ns)].fetch_add(1, std::memory_order_relaxed);
}

double latency_histogram::percentile_us(double p) const {
  std::uint64_t total = 0;
  for (const auto& c : counts_)
    total += c.load(std::memory_order_relaxed);
  if (total == 0)
    return 0;
  auto target = static_cast<std::uint64_t>(std::ceil(p * double(total)));
  std::uint64_t seen = 0;
  for (int b = 0; b < buckets; ++b) {
    seen += counts_[b].load(std::memory_order_relaxed);
    if (seen >= target)
      return upper_bound_ns(b) / 1000.0;
  }
  return upper_bound_ns(buckets - 1) / 1000.0;
}

engine_metrics::engine_metrics(std::uint32_t worker_count)
  : kv_bytes(new std::atomic<std::uint64_t>[worker_count]), workers(worker_count) {
  for (std::uint32_t w = 0; w < workers; ++w)
    kv_bytes[w] = 0;
}

void engine_metrics::count_pass(const backends::pass_result& result) {
  tokens_computed.fetch_add(result.tokens_computed, std::memory_order_relaxed);
  matmul_flops.fetch_add(result.matmul_flops, std::memory_order_relaxed);
  compute_ns.fetch_add(result.compute_ns, std::memory_order_relaxed);
}

void engine_metrics::count_error(messages::errc code) {
  auto index = static_cast<std::size_t>(code);
  if (code == messages::errc::none || index >= errors_by_code.size())
    index = static_cast<std::size_t>(messages::errc::backend_failure);
  bump(errors_by_code[index]);
}

engine_stats engine_metrics::snapshot() const {
  auto get = [](const std::atomic<std::uint64_t>& c) {
    return c.load(std::memory_order_relaxed);
  };
  engine_stats s;
  // Every query is counted before its answer: reading the answers first keeps
  // in_flight from going below zero while queries are being answered meanwhile.
  s.answered = get(answered);
  s.failed = get(failed);
  s.queries = get(queries);
  s.in_flight = s.queries - std::min(s.queries, s.answered + s.failed);
  s.cache_hits = get(cache_hits);
  s.merged_duplicates = get(merged_duplicates);
  s.batches = get(batches);
  s.batched_queries = get(batched_queries);
  s.mean_batch_size = s.batches ? double(s.batched_queries) / double(s.batches) : 0.0;
  s.deferred = get(deferred);
  s.failed_passes = get(failed_passes);
  s.tokens_requested = get(tokens_requested);
  s.tokens_computed = get(tokens_computed);
  s.matmul_flops = get(matmul_flops);
  s.compute_seconds = double(get(compute_ns)) * 1e-9;
  s.logprob_evictions = get(logprob_evictions);
  s.kv_evictions = get(kv_evictions);
  s.nodes_removed = get(nodes_removed);
  s.locked_nodes = get(locked_nodes);
  s.refused_attaches = get(refused_attaches);
  s.logprob_entries = get(logprob_entries);
  s.logprob_bytes = get(logprob_bytes);
  for (std::uint32_t w = 0; w < workers; ++w)
    s.kv_bytes.push_back(get(kv_bytes[w]));
  s.latency_p50_us = latency.percentile_us(0.50);
  s.latency_p90_us = latency.percentile_us(0.90);
  s.latency_p99_us = latency.percentile_us(0.99);
  s.latency_seconds = latency_seconds.snapshot();
  s.batch_size = batch_size.snapshot();
  for (std::size_t code = 0; code < errors_by_code.size(); ++code)
    if (auto n = get(errors_by_code[code]))
      s.errors_by_code.emplace_back(
        std::string(messages::to_string(static_cast<messages::errc>(code))), n);
  s.queue_depth = get(queue_depth);
  return s;
}

} // namespace canopy::actors

namespace canopy {

std::string engine_stats::to_json() const {
  nlohmann::json j = {
    {"queries", queries}, {"answered", answered}, {"failed", failed},
    {"cache_hits", cache_hits}, {"merged_duplicates", merged_duplicates},
    {"batches", batches}, {"batched_queries", batched_queries},
    {"mean_batch_size", mean_batch_size}, {"deferred", deferred},
    {"failed_passes", failed_passes}, {"tokens_requested", tokens_requested},
    {"tokens_computed", tokens_computed},
    {"matmul_flops", matmul_flops}, {"compute_seconds", compute_seconds},
    {"evictions", {{"logprobs", logprob_evictions}, {"kv", kv_evictions},
                   {"nodes_removed", nodes_removed}}},
    {"refused_attaches", refused_attaches},
    {"logprob_entries", logprob_entries}, {"locked_nodes", locked_nodes},
    {"bytes", {{"logprobs", logprob_bytes}, {"logprob_budget", logprob_budget_bytes},
               {"kv", kv_bytes}, {"kv_budget_per_worker", kv_budget_bytes}}},
    {"latency_us", {{"p50", latency_p50_us}, {"p90", latency_p90_us},
                    {"p99", latency_p99_us}}},
    {"queue_depth", queue_depth}, {"in_flight", in_flight},
  };
  auto& errors = j["errors_by_code"] = nlohmann::json::object();
  for (const auto& [code, n] : errors_by_code)
    errors[code] = n;
  return j.dump();
}

} // namespace canopy
