#pragma once
// `canopy bench --next-byte`: what next-byte distributions cost through the engine
// (issue 30). For --sequences random sequences of --sequence-length tokens: the first
// call on each (cold: a pass, the masses made and kept), then --queries calls over
// them with prefixes of 0 to 3 bytes (cached: a hit and the masses beside the row),
// side by side in the same run with what a client without the server path does per
// call: fetch the cached row and build the masses over the whole vocabulary itself.
// It reports calls/s of each, their ratio, and the bytes one answer takes on the wire
// (JSON, as POST /v1/next_byte writes it) against the row (the binary format).
// Thread contract: run_next_byte_probe blocks its calling thread.

#include "bench/bench_workloads.hpp"

#include <canopy/engine_config.hpp>

#include <ostream>

namespace canopy::app {

/// Needs a model with a tokenizer (or the mock with `tokenizer`).
void run_next_byte_probe(const engine_config& config, const workload_options& options,
                         std::ostream& out);

} // namespace canopy::app
