#pragma once
// One run of the load generator: a workload and a payload on N keep-alive connections
// for a fixed time, measured from the client's side. hits runs are warmed first (each
// sequence of the set asked for once, not measured).
// Thread contract: run_load blocks its caller and drives every connection on the
// caller's thread (one Asio io_context: one thread keeps 512 connections busy, and
// leaves the machine's other cores to the server).

#include "http_load/http_load_options.hpp"
#include "http_load/http_load_server_info.hpp"
#include "http_load/http_load_tally.hpp"
#include "http_load/http_load_workloads.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace canopy::app {

struct http_load_result {
  http_workload workload = http_workload::hits;
  http_payload payload = http_payload::json;
  std::size_t connections = 0;
  std::uint64_t requests = 0; // valid answers while measuring
  double seconds = 0;         // from the first request to the last answer
  double latency_p50_us = 0, latency_p99_us = 0;   // 0 when no valid answer
  double overhead_p50_us = 0, overhead_p99_us = 0; // latency minus engine dur
  double engine_p50_us = 0;                        // Server-Timing's engine dur
  double response_bytes = 0; // per valid answer, on the wire (headers and body)
  double body_bytes = 0;     // per valid answer
  double client_cpu = 0;     // this process's CPU seconds per second measured
  error_tally errors;        // of warming and measuring
};

/// Throws std::runtime_error when the connections cannot be made.
http_load_result run_load(const http_load_options& options, const served_model& model,
                          http_workload workload, http_payload payload,
                          std::size_t connections, const std::vector<token_ids>& hit_set);

/// Raises this process's open-file limit to hold `connections` sockets, as far as the
/// hard limit allows; throws usage_error naming --connections when it does not.
void ensure_descriptors(std::size_t connections);

} // namespace canopy::app
