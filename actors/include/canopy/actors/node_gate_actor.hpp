#pragma once
// A worker node's gate: the one actor it publishes. It answers nobody who has not
// proven the cluster secret (cluster_auth.hpp) beyond the handshake itself, opens a
// session on every device for each admitted front (one per front link: a link that
// comes back replaces its session), ends the session when the front's link goes down
// (its KV is freed), answers heartbeats, and when the node drains tells the fronts,
// lets the devices finish, then asks each front to confirm it got everything.
// Thread contract: the state is touched only by the actor.

#include <canopy/actors/cluster_auth.hpp>
#include <canopy/messages/node_messages.hpp>

#include <caf/actor_addr.hpp>
#include <caf/typed_response_promise.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace canopy::actors {

struct gate_options {
  std::string secret;                                 // empty: none (loopback only)
  std::uint64_t owner_key = 0;                        // see node_device_actor
  std::vector<messages::device_announcement> devices; // this node's
  std::function<void(const std::string&)> log;        // one line per event
};

struct node_gate_state {
  gate_options options;
  /// Hellos waiting for their front's proof, by the front link's address.
  struct challenge {
    auth_bytes front_nonce, node_nonce;
    messages::worker_link_actor link;
    std::uint64_t number = 0; // its key in challenge_order
  };
  std::unordered_map<caf::actor_addr, challenge> challenges;
  std::map<std::uint64_t, caf::actor_addr> challenge_order; // oldest first
  std::uint64_t next_challenge = 0;
  /// Admitted fronts, by their link's address.
  struct session {
    std::uint64_t token = 0;
    messages::worker_link_actor link;
  };
  std::unordered_map<caf::actor_addr, session> sessions;
  bool draining = false;
  std::size_t devices_running = 0;
  std::vector<caf::typed_response_promise<bool>>
      drained; // answered once the drain is over

  static inline const char* name = "canopy.node_gate";
};

/// Hellos a gate holds at once; past it the oldest is forgotten (a flood of hellos
/// costs bounded memory, and a front whose hello was pushed out tries again).
inline constexpr std::size_t max_pending_challenges = 1024;

messages::node_gate_actor::behavior_type
node_gate(messages::node_gate_actor::stateful_pointer<node_gate_state> self,
          gate_options options);

} // namespace canopy::actors
