#pragma once
// The worker actor: owns one backend (one device) and runs its passes. Spawn it
// detached (spawn_engine_actors does), because a pass blocks its thread for as long as
// the device computes. Every exception of the backend becomes errc::backend_failure for
// the pass's requester, and the worker keeps serving. A pass the device computes on its
// own is answered when its rows are on the host, and meanwhile the worker starts the
// passes behind it (pass_pipeline.hpp).
// Thread contract: the backend is only touched by the worker's own thread.

#include <canopy/actors/pass_pipeline.hpp>
#include <canopy/backends/backend.hpp>
#include <canopy/messages/actor_interfaces.hpp>

#include <caf/actor_system.hpp>

#include <memory>

namespace canopy::actors {

struct worker_state {
  std::unique_ptr<backends::backend_i> backend;
  pass_pipeline passes; // destroyed before the backend it started them on
  static inline const char* name = "canopy.worker";
};

/// worker_actor and what the worker sends itself: INTERNAL, a poll for the rows of the
/// passes it started. Its handle is a worker_actor.
using polling_worker_actor =
    messages::worker_actor::extend<caf::reacts_to<messages::poll_atom>>;

polling_worker_actor::behavior_type
worker(polling_worker_actor::stateful_pointer<worker_state> self,
       std::shared_ptr<std::unique_ptr<backends::backend_i>> backend);

} // namespace canopy::actors
