#pragma once
// The load generator's results: a table row per run (printed as each run finishes, by
// bench_report's print_cells) or JSON, the failed requests by kind, the size of one row
// in each payload, and the serving targets checked (printed by bench_report's
// print_targets).
// Thread contract: pure functions.

#include "bench/bench_report.hpp"
#include "http_load/http_load_run.hpp"

#include <nlohmann/json.hpp>

#include <ostream>
#include <string>
#include <vector>

namespace canopy::app {

void print_http_table_header(std::ostream& out);
void print_http_table_row(std::ostream& out, const http_load_result& result);
/// Explains the columns.
void print_http_table_legend(std::ostream& out);
nlohmann::json to_json(const http_load_result& result);

/// One line per run with failed requests, naming the kinds of failure.
void print_http_errors(std::ostream& out, const std::vector<http_load_result>& results);

/// Each completions run's prompt tokens scored per second, and each prefill run's read
/// (requests/s x `sequence_length`).
void print_scoring_rates(std::ostream& out, const std::vector<http_load_result>& results,
                         std::size_t sequence_length);

/// One full-vocabulary row after `sequence_length` tokens: the mean body of a valid
/// answer in each payload measured (null in JSON for a payload not run; nothing
/// printed when only completions ran).
void print_row_sizes(std::ostream& out, const std::vector<http_load_result>& results,
                     const served_model& model, std::size_t sequence_length);
nlohmann::json row_sizes_json(const std::vector<http_load_result>& results,
                              const served_model& model, std::size_t sequence_length);

/// The serving goals (set for stories260K on a 2-core machine): at least 20k cache-hit
/// requests/s with binary answers (the best hits/binary run), and a server overhead
/// under 100 us at p50 (hits/binary on the fewest connections, where no request waits
/// behind another).
std::vector<target_check>
evaluate_http_targets(const std::vector<http_load_result>& results);

} // namespace canopy::app
