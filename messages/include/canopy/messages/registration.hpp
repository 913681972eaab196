#pragma once
// The one registration function: every message type and the error category, under
// the same names on every node (a type unknown to the receiver arrives as an empty
// message, so all nodes must call this).
// Thread contract: call before the actor system is constructed.

#include <caf/actor_system_config.hpp>

namespace canopy::messages {

void add_message_types(caf::actor_system_config& config);

} // namespace canopy::messages
