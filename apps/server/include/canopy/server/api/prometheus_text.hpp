#pragma once
// /metrics: the engine's and the transport's counters in the Prometheus text
// exposition format (version 0.0.4), every metric named canopy_* with HELP and TYPE.
// Thread contract: pure function.

#include <canopy/engine_stats.hpp>
#include <canopy/server/server_metrics.hpp>

#include <string>

namespace canopy::server {

/// The Content-Type of the text format.
inline constexpr const char* prometheus_content_type =
    "text/plain; version=0.0.4; charset=utf-8";

std::string prometheus_text(const engine_stats& engine, const server_stats& server);

} // namespace canopy::server
