#pragma once
// `canopy bench --tier-probe`: when the KV host tier pays. On the bare backend, a
// prompt's KV is computed, demoted to the host tier and read back by a one-token pass
// (which promotes it first); the report sets the time and bytes moved per token
// against the time to recompute a token, and gives the break-even bandwidth: the
// slowest tier link at which moving a token's KV still beats recomputing it.
// Thread contract: run_tier_probe blocks its calling thread.

#include "bench/bench_workloads.hpp"

#include <canopy/engine_config.hpp>

#include <ostream>

namespace canopy::app {

/// `options.prompt_length` tokens per round. Without kv_host_budget_bytes in `config`,
/// the host tier gets the device's budget.
void run_tier_probe(engine_config config, const workload_options& options,
                    std::ostream& out);

} // namespace canopy::app
