#pragma once
// The worker actor: owns one backend (one device) and runs its passes. Spawn it
// detached (spawn_engine_actors does), because a pass blocks its thread for as long as
// the device computes. Every exception of the backend becomes errc::backend_failure for
// the pass's requester, and the worker keeps serving.
// Thread contract: the backend is only touched by the worker's own thread.

#include <canopy/backends/backend.hpp>
#include <canopy/messages/actor_interfaces.hpp>

#include <caf/actor_system.hpp>

#include <memory>

namespace canopy::actors {

struct worker_state {
  std::unique_ptr<backends::backend_i> backend;
  static inline const char* name = "canopy.worker";
};

messages::worker_actor::behavior_type
worker(messages::worker_actor::stateful_pointer<worker_state> self,
       std::shared_ptr<std::unique_ptr<backends::backend_i>> backend);

} // namespace canopy::actors
