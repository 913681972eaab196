#pragma once
// An engine's counters once the locks of answered queries are back with the cache.
// The batcher returns those locks to the cache right after answering, so a caller
// that reads stats() the moment its answer arrives may still count the last few as
// held; tests that assert no lock outlives its query read the counters through this.
// Thread contract: test-only; called from the test's thread while no query is in
// flight.

#include <canopy/engine.hpp>

#include <chrono>
#include <thread>

namespace canopy::testing {

// Polls for up to five seconds; past that a lock is leaked, and the caller's
// assertion on locked_nodes reports the count that stayed.
inline engine_stats stats_once_locks_released(const engine& lm) {
  engine_stats stats = lm.stats();
  for (int i = 0; i < 500 && stats.locked_nodes != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    stats = lm.stats();
  }
  return stats;
}

} // namespace canopy::testing
