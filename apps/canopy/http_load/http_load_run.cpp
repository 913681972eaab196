#include "http_load/http_load_run.hpp"

#include "cli_args.hpp"
#include "http_load/http_load_connection.hpp"
#include "http_load/http_load_request.hpp"
#include "open_file_limit.hpp"
#include "quantile.hpp"

#include <algorithm>
#include <memory>

#include <sys/resource.h>

namespace canopy::app {

namespace asio = boost::asio;

namespace {

constexpr std::chrono::seconds connect_limit{10};
// How long answers may take after the measured time (or, warming, in all) before the
// requests still in flight are counted as unanswered: a stuck server must not hang
// the benchmark.
constexpr std::chrono::seconds answer_grace{10};
constexpr std::chrono::seconds warm_limit{60};
// Descriptors beyond the connections: standard streams, the io_context's own.
constexpr std::size_t spare_descriptors = 32;

using connections_t = std::vector<std::unique_ptr<load_connection>>;
using sources_t = std::vector<std::unique_ptr<request_source>>;

/// Runs every open connection on its source until all stop, or `limit_after` passes.
void run_phase(asio::io_context& io, connections_t& connections, sources_t& sources,
               const request_writer& writer, http_payload payload, std::size_t vocab,
               bool engine_timed, load_clock::time_point stop_at,
               load_clock::duration limit_after, load_tally& tally) {
  asio::steady_timer limit(io, limit_after);
  load_phase phase{writer, payload, vocab, engine_timed, stop_at, limit, tally};
  phase.running =
      static_cast<std::size_t>(std::count_if(connections.begin(), connections.end(),
                                             [](const auto& c) { return c->is_open(); }));
  if (phase.running == 0)
    return;
  limit.async_wait([&](boost::system::error_code cancelled) {
    if (!cancelled)
      for (auto& c : connections)
        c->abandon();
  });
  for (std::size_t i = 0; i < connections.size(); ++i)
    if (connections[i]->is_open())
      connections[i]->start(phase, *sources[i]);
  io.restart();
  io.run();
}

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) {
    return double(t.tv_sec) + t.tv_usec * 1e-6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

} // namespace

http_load_result run_load(const http_load_options& options, const served_model& model,
                          http_workload workload, http_payload payload,
                          std::size_t connection_count,
                          const std::vector<token_ids>& hit_set) {
  // Hint 1: a single thread runs this io_context, so Asio may skip its locking.
  asio::io_context io(1);
  connections_t connections;
  for (auto& socket : connect_all(io, options.target, connection_count, connect_limit))
    connections.push_back(std::make_unique<load_connection>(std::move(socket)));
  const request_writer writer(options, payload, model.openai_id);
  const bool engine_timed = options.vocab_size == 0; // Canopy, which describes its model
  load_tally tally;
  sources_t sources;
  if (workload == http_workload::hits) {
    std::size_t cursor = 0;
    for (std::size_t i = 0; i < connection_count; ++i)
      sources.push_back(warm_source(hit_set, cursor));
    load_tally warm;
    run_phase(io, connections, sources, writer, payload, model.vocab_size, engine_timed,
              load_clock::time_point::max(), warm_limit, warm);
    tally.errors = std::move(warm.errors);
    sources.clear();
  }
  // Each connection draws its own stream of hits (the golden-ratio multiple keeps
  // nearby seeds apart), so that connections do not ask in lockstep.
  for (std::size_t i = 0; i < connection_count; ++i)
    sources.push_back(
        workload == http_workload::hits
            ? hit_source(hit_set, options.seed ^ (0x9E3779B97F4A7C15ull * (i + 1)))
            : miss_source(options.sequence_length, model.vocab_size));
  const auto duration = std::chrono::duration_cast<load_clock::duration>(
      std::chrono::duration<double>(options.duration_s));
  const double cpu_before = cpu_seconds();
  const auto start = load_clock::now();
  run_phase(io, connections, sources, writer, payload, model.vocab_size, engine_timed,
            start + duration, duration + answer_grace, tally);
  const double cpu = cpu_seconds() - cpu_before;

  http_load_result r;
  r.workload = workload;
  r.payload = payload;
  r.connections = connection_count;
  r.requests = tally.latency_us.size();
  r.seconds =
      std::chrono::duration<double>(std::max(tally.last_answer, start) - start).count();
  r.latency_p50_us = quantile(tally.latency_us, 0.5);
  r.latency_p99_us = quantile(tally.latency_us, 0.99);
  r.overhead_p50_us = quantile(tally.overhead_us, 0.5);
  r.overhead_p99_us = quantile(tally.overhead_us, 0.99);
  r.engine_p50_us = quantile(tally.engine_us, 0.5);
  if (r.requests) {
    r.response_bytes = double(tally.response_bytes) / double(r.requests);
    r.body_bytes = double(tally.body_bytes) / double(r.requests);
  }
  const double wall = std::chrono::duration<double>(load_clock::now() - start).count();
  r.client_cpu = wall > 0 ? cpu / wall : 0;
  r.errors = std::move(tally.errors);
  return r;
}

void ensure_descriptors(std::size_t connections) {
  const std::size_t needed = connections + spare_descriptors;
  const auto allowed = raise_open_file_limit(needed);
  if (allowed < needed)
    throw usage_error("--connections " + std::to_string(connections) + ": needs " +
                      std::to_string(needed) + " open files, and this process may open " +
                      std::to_string(allowed) + " at most (ulimit -Hn)");
}

} // namespace canopy::app
