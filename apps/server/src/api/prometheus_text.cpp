#include <canopy/server/api/prometheus_text.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <string_view>
#include <utility>

namespace canopy::server {

namespace {

using label_list = std::initializer_list<std::pair<std::string_view, std::string_view>>;

/// A float as the format writes it: Go's ParseFloat reads it back ("+Inf", "NaN").
std::string number_text(double value) {
  if (std::isnan(value))
    return "NaN";
  if (std::isinf(value))
    return value > 0 ? "+Inf" : "-Inf";
  char buffer[32];
  return std::string(buffer, std::to_chars(buffer, buffer + sizeof buffer, value).ptr);
}

std::string number_text(std::uint64_t value) {
  return std::to_string(value);
}

/// Writes metric families in the text format: HELP and TYPE first, then the samples.
class exposition {
public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    append_escaped(help, false); // HELP text escapes backslash and newline only
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }

  template <class V>
  void sample(std::string_view name, std::string_view suffix, label_list labels,
              V value) {
    out_ += name;
    out_ += suffix;
    if (labels.size() > 0) {
      char separator = '{';
      for (const auto& [label, text] : labels) {
        out_ += separator;
        out_ += label;
        out_ += "=\"";
        append_escaped(text, true);
        out_ += '"';
        separator = ',';
      }
      out_ += '}';
    }
    out_ += ' ';
    out_ += number_text(value);
    out_ += '\n';
  }

  /// A family of one unlabelled sample.
  template <class V>
  void single(std::string_view name, std::string_view type, std::string_view help,
              V value) {
    family(name, type, help);
    sample(name, "", {}, value);
  }

  /// Buckets cumulative up to le="+Inf", then _sum and _count.
  void histogram(std::string_view name, std::string_view help,
                 const histogram_snapshot& h) {
    family(name, "histogram", help);
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < h.upper_bounds.size(); ++i) {
      cumulative += i < h.counts.size() ? h.counts[i] : 0;
      sample(name, "_bucket", {{"le", number_text(h.upper_bounds[i])}}, cumulative);
    }
    // _count is the +Inf bucket rather than h.count: the snapshot reads its counters
    // one by one, and the exposition must agree with itself.
    const std::uint64_t total =
        std::accumulate(h.counts.begin(), h.counts.end(), std::uint64_t{0});
    sample(name, "_bucket", {{"le", "+Inf"}}, total);
    sample(name, "_sum", {}, h.sum);
    sample(name, "_count", {}, total);
  }

  std::string take() { return std::move(out_); }

private:
  void append_escaped(std::string_view text, bool quote) {
    for (char c : text) {
      if (c == '\n') {
        out_ += "\\n";
        continue;
      }
      if (c == '\\' || (quote && c == '"'))
        out_ += '\\';
      out_ += c;
    }
  }

  std::string out_;
};

constexpr std::string_view counter = "counter";
constexpr std::string_view gauge = "gauge";

/// One family with a sample per worker, labelled with its slot, node and device.
template <class Value>
void per_worker(exposition& x, const std::vector<worker_stats>& workers,
                std::string_view name, std::string_view type, std::string_view help,
                Value value) {
  x.family(name, type, help);
  for (const auto& w : workers) {
    const auto id = std::to_string(w.id);
    x.sample(name, "", {{"worker", id}, {"node", w.node}, {"device", w.device}},
             value(w));
  }
}

void append_workers(exposition& x, const std::vector<worker_stats>& workers) {
  per_worker(x, workers, "canopy_worker_up", gauge,
             "1 while the worker serves (active or draining), 0 once lost.",
             [](const worker_stats& w) { return std::uint64_t{w.state != "lost"}; });
  per_worker(x, workers, "canopy_kv_cache_bytes", gauge, "KV bytes held, per worker.",
             [](const worker_stats& w) { return w.kv_bytes; });
  per_worker(x, workers, "canopy_kv_cache_peak_bytes", gauge,
             "The most KV bytes held at once, per worker.",
             [](const worker_stats& w) { return w.kv_peak_bytes; });
  per_worker(x, workers, "canopy_kv_cache_budget_bytes", gauge,
             "KV budget the cache enforces, per worker.",
             [](const worker_stats& w) { return w.kv_budget_bytes; });
  per_worker(x, workers, "canopy_kv_host_cache_bytes", gauge,
             "KV bytes moved to the worker's host tier (not in canopy_kv_cache_bytes).",
             [](const worker_stats& w) { return w.kv_host_bytes; });
  per_worker(x, workers, "canopy_kv_host_cache_budget_bytes", gauge,
             "Host tier budget the cache enforces, per worker (0: no host tier).",
             [](const worker_stats& w) { return w.kv_host_budget_bytes; });
  per_worker(x, workers, "canopy_worker_passes_total", counter,
             "Passes the worker returned.",
             [](const worker_stats& w) { return w.passes; });
  per_worker(x, workers, "canopy_worker_tokens_computed_total", counter,
             "Tokens the worker computed.",
             [](const worker_stats& w) { return w.tokens_computed; });
  per_worker(x, workers, "canopy_worker_passes_in_flight", gauge,
             "Passes sent to the worker and not back.",
             [](const worker_stats& w) { return w.in_flight; });
  per_worker(x, workers, "canopy_worker_losses_total", counter,
             "Times the worker was lost.",
             [](const worker_stats& w) { return w.losses; });
  per_worker(x, workers, "canopy_worker_redispatched_queries_total", counter,
             "Queries of the worker's passes sent to other workers when it was lost.",
             [](const worker_stats& w) { return w.redispatched_queries; });
  x.family("canopy_worker_heartbeat_age_seconds", gauge,
           "Since the remote worker's node last answered a heartbeat.");
  for (const auto& w : workers)
    if (w.heartbeat_age_ms >= 0)
      x.sample("canopy_worker_heartbeat_age_seconds", "",
               {{"worker", std::to_string(w.id)}, {"node", w.node}, {"device", w.device}},
               w.heartbeat_age_ms / 1000);
}

void append_nodes(exposition& x, const std::vector<node_stats>& nodes) {
  x.family(
      "canopy_node_state", gauge,
      "1 for the state each remote worker node is in (connecting, admitted, refused, "
      "lost, unreachable).");
  for (const auto& n : nodes)
    x.sample("canopy_node_state", "", {{"node", n.address}, {"state", n.state}},
             std::uint64_t{1});
  x.family("canopy_node_admissions_total", counter, "Times the node was admitted.");
  for (const auto& n : nodes)
    x.sample("canopy_node_admissions_total", "", {{"node", n.address}}, n.admissions);
  x.family("canopy_node_losses_total", counter, "Times the node was lost.");
  for (const auto& n : nodes)
    x.sample("canopy_node_losses_total", "", {{"node", n.address}}, n.losses);
}

void append_engine(exposition& x, const engine_stats& e) {
  x.single("canopy_queries_total", counter, "Engine queries, accepted or rejected.",
           e.queries);
  x.single("canopy_queries_answered_total", counter, "Queries answered with log-probs.",
           e.answered);
  x.single("canopy_queries_failed_total", counter, "Queries answered with an error.",
           e.failed);
  x.family("canopy_query_errors_total", counter, "Failed queries by error code.");
  for (const auto& [code, count] : e.errors_by_code)
    x.sample("canopy_query_errors_total", "", {{"code", code}}, count);
  x.single("canopy_cache_hits_total", counter, "Queries answered from stored rows.",
           e.cache_hits);
  x.single("canopy_merged_duplicates_total", counter,
           "Queries that joined an equal waiting or in-flight query.",
           e.merged_duplicates);
  x.single("canopy_batches_total", counter, "Forward passes run.", e.batches);
  x.single("canopy_failed_passes_total", counter, "Forward passes that failed.",
           e.failed_passes);
  x.single("canopy_deferred_queries_total", counter,
           "Queries moved to a later pass to reuse its KV.", e.deferred);
  x.histogram("canopy_batch_size", "Distinct queries per forward pass.", e.batch_size);
  x.single("canopy_tokens_requested_total", counter, "Tokens of accepted queries.",
           e.tokens_requested);
  x.single("canopy_tokens_computed_total", counter,
           "Tokens the backends were asked to compute.", e.tokens_computed);
  x.single("canopy_compute_seconds_total", counter, "Time the backends spent on passes.",
           e.compute_seconds);
  x.family("canopy_evictions_total", counter, "Cache evictions by kind.");
  x.sample("canopy_evictions_total", "", {{"kind", "logprobs"}}, e.logprob_evictions);
  x.sample("canopy_evictions_total", "", {{"kind", "kv"}}, e.kv_evictions);
  x.family("canopy_kv_tier_moves_total", counter,
           "KV entries moved between a device and its host tier, by direction.");
  x.sample("canopy_kv_tier_moves_total", "", {{"direction", "demote"}}, e.kv_demotions);
  x.sample("canopy_kv_tier_moves_total", "", {{"direction", "promote"}}, e.kv_promotions);
  x.family("canopy_kv_tier_moved_bytes_total", counter,
           "KV bytes moved between a device and its host tier, by direction.");
  x.sample("canopy_kv_tier_moved_bytes_total", "", {{"direction", "demote"}},
           e.kv_demoted_bytes);
  x.sample("canopy_kv_tier_moved_bytes_total", "", {{"direction", "promote"}},
           e.kv_promoted_bytes);
  x.single("canopy_refused_attaches_total", counter,
           "Rows or KV not stored for lack of room.", e.refused_attaches);
  x.single("canopy_logprob_cache_entries", gauge, "Stored log-prob rows.",
           e.logprob_entries);
  x.single("canopy_next_byte_queries_total", counter,
           "Next-byte calls, accepted or rejected (also in canopy_queries_total).",
           e.next_byte_queries);
  x.single("canopy_next_byte_masses_made_total", counter,
           "Next-byte calls whose row had no masses beside it yet.",
           e.next_byte_masses_made);
  x.single("canopy_next_byte_masses_kept", gauge,
           "Cached rows with next-byte masses beside them.", e.next_byte_masses_kept);
  x.single("canopy_cache_locked_nodes", gauge,
           "Trie nodes held by waiting or computing queries.", e.locked_nodes);
  x.single("canopy_logprob_cache_bytes", gauge,
           "Bytes of stored log-prob rows and the next-byte masses beside them.",
           e.logprob_bytes);
  x.single("canopy_logprob_cache_budget_bytes", gauge, "Budget of stored log-prob rows.",
           e.logprob_budget_bytes);
  append_workers(x, e.workers);
  append_nodes(x, e.nodes);
  x.single("canopy_queue_depth", gauge, "Distinct queries waiting in the batcher.",
           e.queue_depth);
  x.single("canopy_queries_in_flight", gauge, "Accepted queries not answered yet.",
           e.in_flight);
  x.histogram("canopy_query_latency_seconds", "Accepted query to answer or failure.",
              e.latency_seconds);
}

void append_server(exposition& x, const server_stats& s) {
  x.single("canopy_http_connections_open", gauge, "Open HTTP connections.",
           s.connections_open);
  x.single("canopy_http_connections_accepted_total", counter,
           "HTTP connections accepted.", s.connections_accepted);
  x.single("canopy_http_connections_refused_total", counter,
           "HTTP connections closed at once for being over the limit.",
           s.connections_refused);
  x.family("canopy_http_requests_total", counter,
           "HTTP requests answered, by route and status.");
  for (const auto& [key, count] : s.requests)
    x.sample("canopy_http_requests_total", "",
             {{"route", key.first}, {"status", std::to_string(key.second)}}, count);
  x.histogram("canopy_http_request_duration_seconds",
              "Request read whole to response written.", s.request_seconds);
  x.single("canopy_http_received_bytes_total", counter, "Request body bytes received.",
           s.bytes_received);
  x.single("canopy_http_sent_bytes_total", counter, "Response body bytes sent.",
           s.bytes_sent);
  x.single("canopy_http_cancelled_requests_total", counter,
           "Requests whose client left before the answer.", s.cancelled_requests);
  x.family(
      "canopy_http_budget_used", gauge,
      "What each budget holds now: answers and bodies in bytes, generation in tokens.");
  for (const auto& b : s.budgets)
    x.sample("canopy_http_budget_used", "", {{"budget", b.name}, {"unit", b.unit}},
             b.used);
  x.family("canopy_http_budget_limit", gauge, "Each budget's limit (its flag).");
  for (const auto& b : s.budgets)
    x.sample("canopy_http_budget_limit", "", {{"budget", b.name}, {"unit", b.unit}},
             b.limit);
}

} // namespace

std::string prometheus_text(const engine_stats& engine, const server_stats& server) {
  exposition x;
  append_engine(x, engine);
  append_server(x, server);
  return x.take();
}

} // namespace canopy::server
