#pragma once
// Bench results as rows of a fixed-width table (printed as each run finishes) or as
// JSON, with the derived ratios computed in one place; and the engine's targets checked
// against a run's results. The table printer serves the HTTP load report as well.
// Thread contract: pure functions.

#include "bench/bench_runner.hpp"
#include "bench/device_ceilings.hpp"

#include <nlohmann/json.hpp>

#include <canopy/engine_config.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace canopy::app {

/// `value` with `decimals` digits after the point.
std::string fixed(double value, int decimals);
/// One table line: cells[i] padded to |widths[i]| characters, left-aligned where the
/// width is negative and right-aligned otherwise, one space between cells.
void print_cells(std::ostream& out, const std::vector<int>& widths,
                 const std::vector<std::string>& cells);

/// With `network`, each row also says where its workers are and what their passes and
/// the wire cost (remote workers).
void print_table_header(std::ostream& out, bool network);
void print_table_row(std::ostream& out, const bench_result& result, bool network);
/// Explains the columns.
void print_table_legend(std::ostream& out, bool network);
/// For each smc run through the engine, the most KV it held and what that is per
/// particle (a sliding window bounds it).
void print_kv_peaks(std::ostream& out, const std::vector<bench_result>& results,
                    std::size_t particles);
nlohmann::json to_json(const bench_result& result);

/// One of the engine's goals, checked on a run's results.
struct target_check {
  std::string label;      // what is measured, e.g. "cache-hit queries/s (hits)"
  std::string comparison; // ">=", "<=" or "=="
  double goal = 0;
  int decimals = 0;  // how measured and goal print
  std::string needs; // the flags that make it run, when it did not
  bool ran = false;  // nothing below is set if not
  double measured = 0;
  std::string detail; // the measured value's terms, e.g. "(96 computed, 96 unique)"
  bool pass = false;
};

/// Mock backend (goals at zero simulated cost): cache-hit queries/s (hits) >= 300k,
/// miss queries/s (misses) >= 100k, tokens computed == unique tokens for smc, scoring
/// and misses. A model: tokens computed / unique <= 1.02 for smc and scoring, and SMC
/// with KV reuse at least 10x faster than without (full vs no-kv).
/// With a model, also the scoring passes' GFLOP/s against the device's matrix-product
/// rate in `ceilings`: at least half of it on the CPU (the goal is set for a synthetic
/// Llama of ~100M parameters at batch 64), 40% on a GPU (issue 32: its bfloat16 peak,
/// a ~1B Llama scoring every prefix of 64 sequences of 256 tokens). On a GPU, decode
/// (one sequence) within 60% of the bandwidth bound: the time a step takes to read the
/// weights it reads (bench_result::step_weight_bytes) at the device's copy rate, over
/// the time per token measured.
/// These are read on the in-process rows. With runs on remote workers: computed/unique
/// for each number of them (at most 1.01 for the mock with several: each may compute a
/// short shared prefix once, Note [routing]), and for scoring and misses (independent
/// prompts) run on both 1 and 4 remote workers, queries/s with 4 at least 3.5x that with
/// 1 (the goal is for a simulated device cost: at zero cost the front is the bottleneck).
std::vector<target_check> evaluate_targets(const std::vector<bench_result>& results,
                                           const engine_config& config,
                                           const device_ceilings& ceilings);
/// The targets section printed after the table.
void print_targets(std::ostream& out, const std::vector<target_check>& targets,
                   const engine_config& config);
nlohmann::json targets_json(const std::vector<target_check>& targets,
                            const engine_config& config);

} // namespace canopy::app
