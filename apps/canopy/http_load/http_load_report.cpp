#include "http_load/http_load_report.hpp"

namespace canopy::app {

namespace {

constexpr double hit_requests_goal = 20000;
constexpr double overhead_goal_us = 100;

double per_second(const http_load_result& r) {
  return r.seconds > 0 ? double(r.requests) / r.seconds : 0.0;
}

// Negative widths are left-aligned.
const std::vector<int> widths{-8, -7, 5, 9, 7, 9, 9, 9, 9, 9, 9, 8, 7, 6};

std::string on_connections(std::size_t n) {
  return "on " + std::to_string(n) + " connection" + (n == 1 ? "" : "s");
}

std::string run_name(const http_load_result& r) {
  return std::string(to_string(r.workload)) + "/" + std::string(to_string(r.payload)) +
         " " + on_connections(r.connections);
}

/// The mean body of a valid answer over every run of `payload`; 0 if none.
double mean_body_bytes(const std::vector<http_load_result>& results,
                       http_payload payload) {
  double bytes = 0, answers = 0;
  for (const auto& r : results)
    if (r.payload == payload) {
      bytes += r.body_bytes * double(r.requests);
      answers += double(r.requests);
    }
  return answers > 0 ? bytes / answers : 0;
}

} // namespace

void print_http_table_header(std::ostream& out) {
  print_cells(out, widths,
              {"workload", "payload", "conns", "requests", "seconds", "req/s", "p50 us",
               "p99 us", "ovh p50", "ovh p99", "eng p50", "B/answer", "cli cpu",
               "errors"});
}

void print_http_table_row(std::ostream& out, const http_load_result& r) {
  print_cells(out, widths,
              {std::string(to_string(r.workload)), std::string(to_string(r.payload)),
               std::to_string(r.connections), std::to_string(r.requests),
               fixed(r.seconds, 2), fixed(per_second(r), 0), fixed(r.latency_p50_us, 1),
               fixed(r.latency_p99_us, 1), fixed(r.overhead_p50_us, 1),
               fixed(r.overhead_p99_us, 1), fixed(r.engine_p50_us, 1),
               fixed(r.response_bytes, 0), fixed(100 * r.client_cpu, 0) + "%",
               std::to_string(r.errors.total)});
}

void print_http_table_legend(std::ostream& out) {
  out << "requests: valid answers (status 200, the payload asked for, one full row after "
         "the tokens sent;\nnext_byte: 256 values after them; completions: every prompt "
         "token sent scored;\nprefill: one choice after the prompt sent);\np50/p99: "
         "latency from writing a request to reading its "
         "answer; ovh: that latency minus the\nengine's time (Server-Timing engine;dur), "
         "so the server's HTTP, JSON and queueing cost plus the\nloopback; eng: the "
         "engine's time; B/answer: bytes of an answer on the wire (headers and body);\n"
         "cli cpu: this client's CPU time per second measured (100% = one core); errors: "
         "failed requests\n";
}

nlohmann::json to_json(const http_load_result& r) {
  nlohmann::json kinds = nlohmann::json::array();
  for (const auto& [message, count] : r.errors.kinds)
    kinds.push_back({{"message", message}, {"count", count}});
  return {
      {"workload", std::string(to_string(r.workload))},
      {"payload", std::string(to_string(r.payload))},
      {"connections", r.connections},
      {"requests", r.requests},
      {"seconds", r.seconds},
      {"requests_per_second", per_second(r)},
      {"latency_us", {{"p50", r.latency_p50_us}, {"p99", r.latency_p99_us}}},
      {"server_overhead_us", {{"p50", r.overhead_p50_us}, {"p99", r.overhead_p99_us}}},
      {"engine_us", {{"p50", r.engine_p50_us}}},
      {"response_bytes_per_request", r.response_bytes},
      {"body_bytes_per_request", r.body_bytes},
      {"client_cpu", r.client_cpu},
      {"errors", r.errors.total},
      {"error_kinds", std::move(kinds)},
      {"errors_of_unlisted_kinds", r.errors.unlisted},
  };
}

void print_http_errors(std::ostream& out, const std::vector<http_load_result>& results) {
  for (const auto& r : results) {
    if (!r.errors.total)
      continue;
    out << "canopy bench: " << run_name(r) << ": " << r.errors.total << " failed request"
        << (r.errors.total == 1 ? "" : "s") << ":\n";
    for (const auto& [message, count] : r.errors.kinds)
      out << "  " << count << " x " << message << '\n';
    if (r.errors.unlisted)
      out << "  " << r.errors.unlisted << " x further kinds, not listed\n";
  }
}

void print_scoring_rates(std::ostream& out, const std::vector<http_load_result>& results,
                         std::size_t sequence_length) {
  for (const auto& r : results)
    if (r.payload == http_payload::completions || r.payload == http_payload::prefill)
      out << "prompt tokens "
          << (r.payload == http_payload::completions ? "scored" : "read (not scored)")
          << " per second, " << run_name(r) << ": "
          << fixed(per_second(r) * double(sequence_length), 0) << " (" << sequence_length
          << " per request)\n";
}

void print_row_sizes(std::ostream& out, const std::vector<http_load_result>& results,
                     const served_model& model, std::size_t sequence_length) {
  const double binary = mean_body_bytes(results, http_payload::binary);
  const double json = mean_body_bytes(results, http_payload::json);
  const double next_byte = mean_body_bytes(results, http_payload::next_byte);
  if (next_byte > 0)
    out << "one next-byte answer (256 values), answer body: JSON " << fixed(next_byte, 0)
        << " bytes\n";
  if (binary == 0 && json == 0)
    return; // only completions or next-byte answers ran
  const auto shown = [](double bytes) {
    return bytes > 0 ? fixed(bytes, 0) + " bytes" : std::string("not measured");
  };
  out << "one full-vocabulary row (vocab " << model.vocab_size << ", after "
      << sequence_length << " tokens), answer body: float32 binary " << shown(binary)
      << " (" << 4 * model.vocab_size << " of values), JSON " << shown(json);
  if (binary > 0 && json > 0)
    out << " (" << fixed(json / binary, 2) << "x binary)";
  out << '\n';
}

nlohmann::json row_sizes_json(const std::vector<http_load_result>& results,
                              const served_model& model, std::size_t sequence_length) {
  const auto bytes = [&](http_payload p) {
    const double b = mean_body_bytes(results, p);
    return b > 0 ? nlohmann::json(b) : nlohmann::json(nullptr);
  };
  return {{"vocab_size", model.vocab_size},
          {"sequence_length", sequence_length},
          {"binary_float32", bytes(http_payload::binary)},
          {"json", bytes(http_payload::json)},
          {"next_byte_json", bytes(http_payload::next_byte)}};
}

std::vector<target_check>
evaluate_http_targets(const std::vector<http_load_result>& results) {
  const http_load_result* best = nullptr;   // most hits/binary requests/s
  const http_load_result* fewest = nullptr; // hits/binary on the fewest connections
  for (const auto& r : results) {
    if (r.workload != http_workload::hits || r.payload != http_payload::binary)
      continue;
    if (!best || per_second(r) > per_second(*best))
      best = &r;
    if (!fewest || r.connections < fewest->connections)
      fewest = &r;
  }
  target_check throughput, overhead;
  throughput.label = "cache-hit requests/s (hits, binary)";
  throughput.comparison = ">=";
  throughput.goal = hit_requests_goal;
  overhead.label = "server overhead p50, us (hits, binary)";
  overhead.comparison = "<=";
  overhead.goal = overhead_goal_us;
  overhead.decimals = 1;
  throughput.needs = overhead.needs = "--workload hits --payload binary";
  if (best) {
    throughput.ran = true;
    throughput.measured = per_second(*best);
    throughput.pass = throughput.measured >= throughput.goal;
    throughput.detail = "(" + on_connections(best->connections) + ")";
    overhead.ran = true;
    overhead.measured = fewest->overhead_p50_us;
    overhead.pass = overhead.measured <= overhead.goal;
    overhead.detail = "(" + on_connections(fewest->connections) + ": latency " +
                      fixed(fewest->latency_p50_us, 1) + " us, engine " +
                      fixed(fewest->engine_p50_us, 1) + " us at p50)";
  }
  return {throughput, overhead};
}

} // namespace canopy::app
