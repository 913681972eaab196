#pragma once
// A device of a worker node (`canopy worker`): the node-side twin of worker_actor,
// spawned detached. It serves fronts by session: a pass runs only for an open session,
// may build only on KV that session made, and the KV a session made is freed when the
// session ends (its front closed, died or was replaced), so a front that dies loses
// nothing durable and leaves nothing behind. LoRA adapters are a session's too: two
// fronts may load different adapters under one key, and each pass sees its own. Passes
// run as a worker_actor's do (pass_pipeline.hpp); one whose session ended before it was
// answered gives its KV back and answers worker_lost.
// Thread contract: the state is touched only by the actor.

#include <canopy/actors/pass_pipeline.hpp>
#include <canopy/backends/backend.hpp>
#include <canopy/messages/actor_interfaces.hpp>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace canopy::actors {

struct node_device_state {
  std::unique_ptr<backends::backend_i> backend;
  std::uint64_t owner_key = 0; // proves a message comes from this node's own actors
  struct session {
    std::unordered_set<cache::kv_handle> kv; // made and not freed
    std::set<std::string> adapters;          // keys it loaded
  };
  /// Open sessions by token.
  std::unordered_map<std::uint64_t, session> sessions;
  pass_pipeline passes; // destroyed before the backend it started them on
  static inline const char* name = "canopy.node_device";
};

/// node_device_actor and its INTERNAL poll for rows (worker_actor.hpp's). Its handle is
/// a node_device_actor.
using polling_node_device_actor =
    messages::node_device_actor::extend<caf::reacts_to<messages::poll_atom>>;

polling_node_device_actor::behavior_type
node_device(polling_node_device_actor::stateful_pointer<node_device_state> self,
            std::shared_ptr<std::unique_ptr<backends::backend_i>> backend,
            std::uint64_t owner_key);

} // namespace canopy::actors
