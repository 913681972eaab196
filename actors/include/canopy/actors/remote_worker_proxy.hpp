#pragma once
// The local stand-in of a remote node's device: a worker_actor the batcher and the
// cache use like any other. It forwards each message to the device with its session's
// token (a pass is delegated, so the device's answer goes straight back to whoever
// asked), and describes the model the device announced. Its link kills it when the
// node is lost, which is how the batcher learns of the loss (its handle goes down).
// Thread contract: the state is touched only by the actor.

#include <canopy/backends/backend.hpp>
#include <canopy/messages/actor_interfaces.hpp>

#include <cstdint>

namespace canopy::actors {

messages::worker_actor::behavior_type
remote_worker_proxy(messages::worker_actor::pointer self,
                    messages::node_device_actor device, std::uint64_t session,
                    backends::model_info model);

} // namespace canopy::actors
