#pragma once
// Whether what a worker answered fits the pass it was asked: as many items, a KV
// handle per new token (or none), and each item's rows of the model's width. A
// remote worker's answer crossed a network from another build of the program; one
// that does not fit fails its batch with backend_failure instead of being stored.
// Thread contract: pure functions.

#include <canopy/backends/backend.hpp>
#include <canopy/messages/computed_pass.hpp>

#include <cstdint>
#include <string>

namespace canopy::actors {

/// "" when `result` answers `request` for a model with `vocab` entries per row, else
/// what does not fit.
std::string computed_pass_problem(const backends::pass_request& request,
                                  const messages::computed_pass& result,
                                  std::int64_t vocab);

} // namespace canopy::actors
