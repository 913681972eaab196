#pragma once
// Spawns and wires the actors of one engine: a worker per backend, the cache actor,
// the batcher and the request (front) actors. The engine and the actor tests share it,
// so tests drive exactly the production wiring.
// Thread contract: call from any thread; the returned handles are values.

#include <canopy/actors/engine_metrics.hpp>
#include <canopy/backends/backend.hpp>
#include <canopy/backends/backend_factory.hpp>
#include <canopy/engine_config.hpp>
#include <canopy/messages/actor_interfaces.hpp>

#include <caf/actor_system.hpp>

#include <memory>
#include <string>
#include <vector>

namespace canopy::actors {

struct engine_actors {
  backends::model_info model;
  std::shared_ptr<engine_metrics> metrics;
  std::vector<messages::worker_actor> workers;
  messages::cache_actor cache;
  messages::batcher_actor batcher;
  std::vector<messages::engine_actor> fronts;

  /// Asks every actor to stop; fronts first, so they answer what they hold.
  void stop() const;
};

enum class worker_threads { detached, scheduled };

/// `config` must be valid. Backends are one per worker, in device order. Tests pass
/// worker_threads::scheduled so a deterministic scheduler runs the workers too.
engine_actors spawn_engine_actors(caf::actor_system& system, const engine_config& config,
                                  std::vector<std::unique_ptr<backends::backend_i>> backends,
                                  worker_threads threads = worker_threads::detached);

/// The description of the backend `config` asks for on `device` (its `backend` key
/// and the mock settings).
backends::backend_spec backend_spec_for(const engine_config& config, const std::string& device);

/// The backends `config` describes (its backend_factory, or its backend key), one per
/// device. Throws canopy::error(errc::invalid_config) naming the device on failure.
std::vector<std::unique_ptr<backends::backend_i>> make_backends(const engine_config& config);

/// A configuration's milliseconds as a CAF duration.
caf::timespan from_ms(double ms);

} // namespace canopy::actors
