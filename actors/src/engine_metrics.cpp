#include <canopy/actors/engine_metrics.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <tuple>

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

std::string_view to_string(worker_status state) {
  return name_of(worker_status_names, state);
}

void node_metrics::set_state(std::string state, std::string last_error) {
  std::lock_guard<std::mutex> guard{mutex_};
  state_ = std::move(state);
  last_error_ = std::move(last_error);
}

std::pair<std::string, std::string> node_metrics::state() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return {state_, last_error_};
}

std::int64_t heartbeat_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string engine_metrics::remote_nodes_summary() const {
  if (nodes_.empty())
    return {};
  std::string out = " (remote workers:";
  for (const auto& n : nodes_) {
    const auto [state, error] = n.state();
    out += " " + n.address + " " + state + (error.empty() ? "" : ": " + error) + ";";
  }
  out.back() = ')';
  return out;
}

engine_metrics::engine_metrics(const std::vector<std::string>& nodes) {
  for (const auto& address : nodes)
    nodes_.emplace_back(address);
}

void engine_metrics::count_pass(std::uint32_t worker, std::uint64_t tokens,
                                std::uint64_t flops, std::uint64_t ns) {
  bump(tokens_computed, tokens);
  bump(matmul_flops, flops);
  bump(compute_ns, ns);
  bump(workers_[worker].passes);
  bump(workers_[worker].tokens_computed, tokens);
}

void engine_metrics::worker_joined(std::uint32_t id, std::string node,
                                   std::string device) {
  workers_[id].state.store(worker_status::active, std::memory_order_relaxed);
  std::lock_guard<std::mutex> guard{labels_mutex_};
  if (worker_labels_.size() <= id)
    worker_labels_.resize(id + 1);
  worker_labels_[id] = {std::move(node), std::move(device)};
  if (worker_count_.load(std::memory_order_relaxed) <= id)
    worker_count_.store(id + 1, std::memory_order_release);
}

void engine_metrics::count_error(messages::errc code) {
  auto index = static_cast<std::size_t>(code);
  if (code == messages::errc::none || index >= errors_by_code.size())
    index = static_cast<std::size_t>(messages::errc::backend_failure);
  bump(errors_by_code[index]);
}

void engine_metrics::publish(const cache::trie_stats& stats) {
  auto set = [](std::atomic<std::uint64_t>& gauge, std::uint64_t v) {
    gauge.store(v, std::memory_order_relaxed);
  };
  for (std::size_t i = 0; i < cache_counters.size(); ++i)
    set(cache_counts[i], stats.*cache_counters[i].in_trie);
  for (std::size_t w = 0; w < stats.kv_bytes.size(); ++w) {
    set(workers_[w].kv_bytes, stats.kv_bytes[w]);
    set(workers_[w].kv_peak_bytes, stats.kv_peak_bytes[w]);
    set(workers_[w].kv_host_bytes, stats.kv_host_bytes[w]);
  }
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
  s.next_byte_queries = get(next_byte_queries);
  s.next_byte_masses_made = get(next_byte_masses_made);
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
  for (std::size_t i = 0; i < cache_counters.size(); ++i)
    s.*cache_counters[i].in_stats = get(cache_counts[i]);
  const auto now = heartbeat_clock_ns();
  auto age_ms = [now](std::int64_t at) {
    return at == 0 ? -1.0 : double(now - at) * 1e-6;
  };
  {
    std::lock_guard<std::mutex> guard{labels_mutex_};
    for (std::uint32_t w = 0; w < worker_labels_.size(); ++w) {
      const auto& m = workers_[w];
      worker_stats ws;
      ws.id = w;
      ws.node = worker_labels_[w].first;
      ws.device = worker_labels_[w].second;
      ws.state = std::string(to_string(m.state.load(std::memory_order_relaxed)));
      ws.passes = get(m.passes);
      ws.tokens_computed = get(m.tokens_computed);
      ws.in_flight = get(m.in_flight);
      ws.heartbeat_age_ms = age_ms(m.last_heartbeat_ns.load(std::memory_order_relaxed));
      ws.losses = get(m.losses);
      ws.redispatched_queries = get(m.redispatched);
      ws.kv_bytes = get(m.kv_bytes);
      ws.kv_peak_bytes = get(m.kv_peak_bytes);
      ws.kv_budget_bytes = get(m.kv_budget_bytes);
      ws.kv_host_bytes = get(m.kv_host_bytes);
      ws.kv_host_budget_bytes = get(m.kv_host_budget_bytes);
      s.kv_bytes.push_back(ws.kv_bytes);
      s.workers.push_back(std::move(ws));
    }
  }
  for (const auto& n : nodes_) {
    node_stats ns;
    ns.address = n.address;
    std::tie(ns.state, ns.last_error) = n.state();
    ns.admissions = get(n.admissions);
    ns.losses = get(n.losses);
    ns.heartbeat_age_ms = age_ms(n.last_heartbeat_ns.load(std::memory_order_relaxed));
    s.nodes.push_back(std::move(ns));
  }
  s.latency_p50_us = latency.percentile_us(0.50);
  s.latency_p90_us = latency.percentile_us(0.90);
  s.latency_p99_us = latency.percentile_us(0.99);
  s.pass_round_trip_p50_us = pass_round_trip.percentile_us(0.50);
  s.pass_round_trip_p99_us = pass_round_trip.percentile_us(0.99);
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
      {"queries", queries},
      {"answered", answered},
      {"failed", failed},
      {"cache_hits", cache_hits},
      {"merged_duplicates", merged_duplicates},
      {"batches", batches},
      {"batched_queries", batched_queries},
      {"mean_batch_size", mean_batch_size},
      {"deferred", deferred},
      {"failed_passes", failed_passes},
      {"tokens_requested", tokens_requested},
      {"tokens_computed", tokens_computed},
      {"matmul_flops", matmul_flops},
      {"compute_seconds", compute_seconds},
      {"evictions",
       {{"logprobs", logprob_evictions},
        {"kv", kv_evictions},
        {"nodes_removed", nodes_removed}}},
      {"kv_tiers",
       {{"demotions", kv_demotions},
        {"demoted_bytes", kv_demoted_bytes},
        {"promotions", kv_promotions},
        {"promoted_bytes", kv_promoted_bytes}}},
      {"refused_attaches", refused_attaches},
      {"logprob_entries", logprob_entries},
      {"next_byte",
       {{"queries", next_byte_queries},
        {"masses_made", next_byte_masses_made},
        {"masses_kept", next_byte_masses_kept}}},
      {"locked_nodes", locked_nodes},
      {"bytes",
       {{"logprobs", logprob_bytes},
        {"logprob_budget", logprob_budget_bytes},
        {"kv", kv_bytes}}},
      {"latency_us",
       {{"p50", latency_p50_us}, {"p90", latency_p90_us}, {"p99", latency_p99_us}}},
      {"pass_round_trip_us",
       {{"p50", pass_round_trip_p50_us}, {"p99", pass_round_trip_p99_us}}},
      {"queue_depth", queue_depth},
      {"in_flight", in_flight},
  };
  auto& errors = j["errors_by_code"] = nlohmann::json::object();
  for (const auto& [code, n] : errors_by_code)
    errors[code] = n;
  auto& workers_json = j["workers"] = nlohmann::json::array();
  for (const auto& w : workers)
    workers_json.push_back({{"id", w.id},
                            {"node", w.node},
                            {"device", w.device},
                            {"state", w.state},
                            {"passes", w.passes},
                            {"tokens_computed", w.tokens_computed},
                            {"in_flight", w.in_flight},
                            {"heartbeat_age_ms", w.heartbeat_age_ms},
                            {"losses", w.losses},
                            {"redispatched_queries", w.redispatched_queries},
                            {"kv_bytes", w.kv_bytes},
                            {"kv_peak_bytes", w.kv_peak_bytes},
                            {"kv_budget_bytes", w.kv_budget_bytes},
                            {"kv_host_bytes", w.kv_host_bytes},
                            {"kv_host_budget_bytes", w.kv_host_budget_bytes}});
  auto& nodes_json = j["nodes"] = nlohmann::json::array();
  for (const auto& n : nodes)
    nodes_json.push_back({{"address", n.address},
                          {"state", n.state},
                          {"last_error", n.last_error},
                          {"admissions", n.admissions},
                          {"losses", n.losses},
                          {"heartbeat_age_ms", n.heartbeat_age_ms}});
  return j.dump();
}

} // namespace canopy
