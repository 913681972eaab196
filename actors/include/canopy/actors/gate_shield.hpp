#pragma once
// What a worker node publishes in front of its gate (node_gate_actor.hpp): an actor that
// forwards every ordinary message to the gate, sender and request id kept (so answers go
// straight back), and drops the system messages a peer could send it: exit_msg, which
// no CAF actor survives with reason kill (CAF 0.17 makes it fatal before any handler
// runs), and down_msg, which would make the gate end another front's session. Only the
// node's own system reaches the gate itself: its monitors' genuine down messages, and
// the owner's exit at shutdown. It holds the gate: once the gate has ended, requests
// forwarded to it bounce with an error.
// Thread contract: enqueue may be called from any thread (it only forwards; gate_ is
// set once).

#include <canopy/messages/node_messages.hpp>

#include <caf/actor_system.hpp>

namespace canopy::actors {

/// The shield of `gate`, to publish in its place.
caf::strong_actor_ptr shield_gate(caf::actor_system& system,
                                  const messages::node_gate_actor& gate);

} // namespace canopy::actors
