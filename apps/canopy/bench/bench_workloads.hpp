#pragma once
// The bench's workloads: SMC particles, greedy decoding of one sequence, prefix scoring,
// cache hits and cache misses. Each
// drives a query_client from the calling thread with many queries in flight, and counts
// what it asked in a sequence_census.
// Thread contract: a workload runs on the calling thread; its client may answer on any.

#include "bench/in_flight.hpp"
#include "bench/sequence_census.hpp"

#include <canopy/cache/enum_names.hpp>
#include <canopy/engine.hpp>

#include <array>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::app {

enum class workload_kind { smc, decode, scoring, hits, misses };

inline constexpr std::array<enum_name<workload_kind>, 5> workload_kind_names{{
    {workload_kind::smc, "smc"},
    {workload_kind::decode, "decode"},
    {workload_kind::scoring, "scoring"},
    {workload_kind::hits, "hits"},
    {workload_kind::misses, "misses"},
}};

std::string_view to_string(workload_kind kind);

struct workload_options {
  std::size_t particles = 64;       // smc: of each population
  std::size_t populations = 1;      // smc: independent populations, each its own
                                    // prompt, stepped together
  std::size_t steps = 64;           // smc, decode
  std::size_t prompt_length = 16;   // smc, decode
  std::size_t sequences = 32;       // scoring: every prefix queried; hits, misses: warmed
  std::size_t sequence_length = 64; // scoring, hits and misses
  std::size_t queries = 200000;     // hits: measured queries
  std::size_t miss_queries = 50000; // misses: measured queries
  std::size_t miss_tokens = 1;      // misses: new tokens after the warmed prompt
  std::size_t in_flight = 4096;     // hits and misses: queries in flight at most,
                                    // refilled from half of it
  std::uint64_t seed = 1;
  /// The LoRA adapters the queries are asked under, round robin by population (smc),
  /// sequence (scoring, hits) or prompt (misses; decode: the first); empty: the base.
  std::vector<std::string> adapters;
};

/// The adapter of population, sequence or prompt `index`: "" (the base) when there are
/// none.
const std::string& adapter_for(const workload_options& options, std::size_t index);

/// How many prompts misses warms: `sequences`, or more when fewer could not give every
/// query its own (prompt, first new token) pair: ceil(miss_queries / vocab).
std::size_t miss_prompt_count(const workload_options& options, std::int64_t vocab);

/// Where a workload's queries go: an engine or the bare backend.
class query_client {
public:
  virtual ~query_client() = default;
  /// Asks for the row after `tokens` under `adapter` ("": the base model); `done` runs
  /// exactly once, on any thread, maybe before ask returns (or, for a client that waits
  /// on futures, in the waits below).
  virtual void ask(token_seq tokens, const std::string& adapter,
                   logprobs_callback done) = 0;
  /// Blocks until at most `count` of the queries `flight` counts are in flight.
  virtual void wait_until_at_most(in_flight& flight, std::size_t count) {
    flight.wait_until_at_most(count);
  }
  /// Blocks until every query is answered; then throws the first error any got.
  virtual void wait_all(in_flight& flight) { flight.wait_all(); }
};

/// Runs one workload. `measure_start` runs once, just before the measured phase (after
/// the hits and misses warm-ups); the call returns when the last measured query is
/// answered, and throws the first error any query got.
sequence_census run_workload(workload_kind kind, const workload_options& options,
                             std::int64_t vocab, query_client& client,
                             const std::function<void()>& measure_start);

} // namespace canopy::app
