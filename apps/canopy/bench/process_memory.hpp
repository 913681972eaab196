#pragma once
// Peak resident memory of the process, restartable so that each bench variant reports
// its own peak rather than the largest of all so far.
// Thread contract: any thread (process-wide state).

#include <cstdint>

namespace canopy::app {

/// Restarts the peak from the current resident size (Linux: /proc/self/clear_refs);
/// false where that is not possible, and the peak stays the process's.
bool reset_peak_rss();
/// getrusage's peak resident size, in bytes.
std::uint64_t peak_rss_bytes();

} // namespace canopy::app
