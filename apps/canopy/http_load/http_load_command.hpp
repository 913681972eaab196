#pragma once
// `canopy bench --target URL`: measures a running `canopy serve` over HTTP, as many
// concurrent clients would use it (bench_command dispatches here when --target is given).
// Thread contract: run on main's thread.

#include <string>
#include <vector>

namespace canopy::app {

/// Whether the arguments after `bench` name --target.
bool names_http_target(const std::vector<std::string>& args);

/// The arguments after `bench`; returns the exit code (1 when any request failed) and
/// throws usage_error or std::runtime_error (target unreachable) for main to report.
int http_load_command(const std::vector<std::string>& args);

} // namespace canopy::app
