#pragma once
// The links of an engine to its remote worker nodes (remote_workers): one link actor
// per node, started beside the composition root's actors (and, with TLS, the
// middleman they connect through). Their devices join the
// batcher like in-process workers, through local proxies.
// Thread contract: call from any thread; the handles are values.

#include <canopy/actors/engine_actors.hpp>
#include <canopy/engine_config.hpp>
#include <canopy/messages/actor_interfaces.hpp>

#include <caf/actor_system.hpp>

#include <vector>

namespace canopy::actors {

/// One link per entry of config.remote_workers, connecting at once, into actors.links,
/// through a middleman spawned for them (cluster_middleman.hpp: the cluster token's
/// gate, and TLS when configured), in actors.middleman (engine_actors::stop ends both).
/// Throws canopy::error(errc::invalid_config) for a cluster_token_file that cannot be
/// read. The system must have been configured for the network (check_actor_system).
void spawn_worker_links(caf::actor_system& system, const engine_config& config,
                        engine_actors& actors);

/// Waits until every link has concluded its first attempt (admitted, refused or not
/// reached), at most `patience`: an engine starts with the nodes that are up, and
/// the others join when they come.
void await_first_attempts(caf::actor_system& system,
                          const std::vector<messages::worker_link_actor>& links,
                          caf::timespan patience);

} // namespace canopy::actors
