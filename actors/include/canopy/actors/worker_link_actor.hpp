#pragma once
// A front's link to one worker node (an entry of remote_workers). It connects through
// cluster_middleman.hpp's middleman, runs the handshake (node_messages.hpp):
// same protocol, each side proving the cluster secret; then makes every device of the
// node join the batcher through a local proxy (remote_worker_proxy.hpp), which admits
// it only if it serves the engine's model. Admitted, it sends heartbeats (Note [loss
// detection] in the source); a node that stops answering them for worker_timeout, or
// whose connection drops, is lost: the link kills its proxies, so the batcher
// re-dispatches their passes, and connects again with backoff. A node that comes back
// takes its old slots, with no KV. Its state and last error are the node's figures in the
// stats. Thread contract: the state is touched only by the actor.

#include <canopy/actors/engine_metrics.hpp>
#include <canopy/messages/node_messages.hpp>

#include <canopy/actors/cluster_middleman.hpp>

#include <caf/actor_clock.hpp>
#include <caf/io/middleman_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace canopy::actors {

struct link_options {
  std::string address; // "host:port", as configured
  std::string host;
  std::uint16_t port = 0;
  std::size_t node_index = 0;                     // the node's entry in engine_metrics
  caf::timespan timeout{std::chrono::seconds(2)}; // worker_timeout_ms
  std::string secret;                             // empty: the front has none
  caf::io::middleman_actor middleman;             // connects (cluster_middleman.hpp)
  std::shared_ptr<gate_refusals> refusals;        // why its gate turned a node away
};

struct worker_link_state {
  link_options options;
  messages::batcher_actor batcher;
  std::shared_ptr<engine_metrics> metrics;
  std::uint64_t attempt = 0; // the current attempt; answers to older ones are ignored
  bool admitted = false;
  messages::node_gate_actor gate;
  std::vector<messages::node_device_actor> devices;
  std::vector<messages::worker_actor> proxies; // [devices]
  std::vector<cache::worker_id> slots;         // [devices] once admitted; kept, so a
                                               // node coming back takes its slots again
  std::uint64_t session = 0;
  caf::timespan backoff{0};
  bool concluded = false;                                 // the first attempt is over
  std::vector<caf::typed_response_promise<bool>> waiting; // for the first attempt

  static inline const char* name = "canopy.worker_link";
};

/// Backoff between attempts: from the first to the longest, doubling.
inline constexpr std::chrono::milliseconds first_backoff{50};
inline constexpr std::chrono::milliseconds longest_backoff{2000};

messages::worker_link_actor::behavior_type
worker_link(messages::worker_link_actor::stateful_pointer<worker_link_state> self,
            link_options options, messages::batcher_actor batcher,
            std::shared_ptr<engine_metrics> metrics);

} // namespace canopy::actors
