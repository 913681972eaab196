#pragma once
// What the answers of one phase of a load run add up to: every valid answer's timings
// and sizes, and the failed requests grouped by what went wrong.
// Thread contract: plain values; a phase's connections fill one tally on their one
// I/O thread.

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace canopy::app {

using load_clock = std::chrono::steady_clock;

/// Errors by message: the first few kinds with their counts, so a run with errors
/// shows what went wrong without printing every one.
struct error_tally {
  static constexpr std::size_t max_kinds = 8;
  std::uint64_t total = 0;
  std::vector<std::pair<std::string, std::uint64_t>> kinds; // first seen first
  std::uint64_t unlisted = 0;                               // errors of further kinds

  void add(std::string message);
};

/// What one phase's answers add up to.
struct load_tally {
  std::vector<double> latency_us;   // per valid answer: request written to answer read
  std::vector<double> overhead_us;  // latency minus Server-Timing's engine dur
  std::vector<double> engine_us;    // Server-Timing's engine dur
  std::uint64_t response_bytes = 0; // of valid answers: status line, headers and body
  std::uint64_t body_bytes = 0;
  error_tally errors;
  load_clock::time_point last_answer{};
};

} // namespace canopy::app
