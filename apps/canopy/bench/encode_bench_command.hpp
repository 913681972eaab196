#pragma once
// `canopy bench --encode FILE`: how fast the model's tokenizer encodes a text file on one
// core (bench_command dispatches here when --encode is given).
// Thread contract: run on main's thread.

#include <string>
#include <vector>

namespace canopy::app {

/// Whether the arguments after `bench` name --encode.
bool names_encode_bench(const std::vector<std::string>& args);

/// The arguments after `bench`; returns the exit code and throws usage_error for main
/// to report.
int encode_bench_command(const std::vector<std::string>& args);

} // namespace canopy::app
