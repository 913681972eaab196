#pragma once
// Raising the process's open-file limit for programs that hold many sockets. A fresh
// Debian shell allows 1024 descriptors (soft) of a much higher hard limit, which would
// cap a server or a load generator near a thousand connections.
// Thread contract: call from main's thread before opening sockets.

#include <cstddef>

namespace canopy::app {

/// Raises the soft limit toward `wanted` descriptors (never past the hard limit) and
/// returns the soft limit now in force.
std::size_t raise_open_file_limit(std::size_t wanted);

} // namespace canopy::app
