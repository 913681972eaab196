#pragma once
// `canopy bench --profile`: where the time of a lone query goes. A greedy decode (one
// uncached query in flight, one new token per pass) runs three ways: through the
// engine on the model, through the engine on the zero-cost mock (the actors, trie and
// messages alone), and on the bare backend with a pass_profile attached (each part of
// a pass). The report splits the engine's latency into these.
// Thread contract: run_pass_breakdown blocks its calling thread.

#include "bench/bench_workloads.hpp"

#include <canopy/engine_config.hpp>

#include <ostream>

namespace canopy::app {

void run_pass_breakdown(const engine_config& config, const workload_options& options,
                        std::ostream& out);

} // namespace canopy::app
