#pragma once
// Bench results as rows of a fixed-width table (printed as each run finishes) or as
// JSON, with the derived ratios computed in one place; and the engine's targets checked
// against a run's results.
// Thread contract: pure functions.

#include "bench_runner.hpp"

#include <nlohmann/json.hpp>

#include <canopy/engine_config.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace canopy::app {

void print_table_header(std::ostream& out);
void print_table_row(std::ostream& out, const bench_result& result);
/// Explains the columns.
void print_table_legend(std::ostream& out);
nlohmann::json to_json(const bench_result& result);

/// One of the engine's goals (at zero simulated cost), checked on a workload's full row.
struct target_check {
  std::string name; // "queries_per_second" or "computed_per_unique"
  workload_kind workload = workload_kind::smc;
  double goal = 0;  // queries/s at least this, or computed/unique exactly this
  bool ran = false; // the run had the workload's full row; nothing below is set if not
  double measured = 0;
  std::uint64_t tokens_computed = 0; // computed_per_unique: its terms
  std::uint64_t unique_tokens = 0;
  bool pass = false;
};

/// Cache-hit queries/s (hits) >= 300k, miss queries/s (misses) >= 100k, and tokens
/// computed == unique tokens for smc, scoring and misses, each on the full variant.
std::vector<target_check> evaluate_targets(const std::vector<bench_result>& results);
/// The targets section printed after the table; `config` tells whether the cost was
/// zero, as the goals assume.
void print_targets(std::ostream& out, const std::vector<target_check>& targets,
                   const engine_config& config);
nlohmann::json targets_json(const std::vector<target_check>& targets,
                            const engine_config& config);

} // namespace canopy::app
