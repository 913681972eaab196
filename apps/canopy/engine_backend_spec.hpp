#pragma once
// The backend an engine builds for its first worker from a config, rebuilt outside the
// engine for the bench's direct baseline and its reference rows. It mirrors the engine's
// own mapping, which the engine API does not expose.
// Thread contract: pure function.

#include <canopy/backends/backend_factory.hpp>
#include <canopy/engine_config.hpp>

namespace canopy::app {

backends::backend_spec engine_backend_spec(const engine_config& config);

} // namespace canopy::app
