#pragma once
// Preparing an actor system for Canopy: its message types always; for a front with
// remote_workers, or a worker node, CAF's network layer (the io middleman) with
// heartbeats, and CAF's OpenSSL module when tls_* are given. An engine that owns its
// system does this itself; a host that runs its own system calls it on its config
// before constructing the system.
// Thread contract: call before the actor system is constructed.

#include <canopy/engine_config.hpp>

#include <caf/actor_system_config.hpp>

namespace caf {
class actor_system;
}

namespace canopy {

enum class network_role { none, front, worker_node };

/// The role `config` gives a front: `front` with remote_workers, else `none`.
network_role front_role(const engine_config& config);

/// Registers Canopy's message types and, for a network role, loads the middleman:
/// heartbeats every worker_timeout_ms / 4 and a connection silent for worker_timeout_ms
/// closed, so a hung peer is noticed; with tls_* also CAF's OpenSSL module with the
/// certificate, key and CA (every peer must present a certificate the CA signed).
void configure_actor_system(caf::actor_system_config& system_config,
                            const engine_config& config, network_role role);

/// Throws canopy::error(errc::invalid_config) when `system` lacks what `role` needs
/// (a host that did not call configure_actor_system).
void check_actor_system(caf::actor_system& system, const engine_config& config,
                        network_role role);

} // namespace canopy
