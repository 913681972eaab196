#pragma once
// Bench results as rows of a fixed-width table (printed as each run finishes) or as
// JSON, with the derived ratios computed in one place.
// Thread contract: pure functions.

#include "bench_runner.hpp"

#include <nlohmann/json.hpp>

#include <ostream>

namespace canopy::app {

void print_table_header(std::ostream& out);
void print_table_row(std::ostream& out, const bench_result& result);
/// Explains the columns.
void print_table_legend(std::ostream& out);
nlohmann::json to_json(const bench_result& result);

} // namespace canopy::app
