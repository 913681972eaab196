#pragma once
// The handshake between a front and a worker node (docs/across-machines.md: "Across
// machines"):
//   front -> gate   hello {protocol, front nonce, link}
//   gate -> front   challenge {protocol, node nonce, proof}
//   front -> gate   auth {front's proof}
//   gate -> front   announcement {session, devices}
// Proofs are HMAC-SHA256 of both nonces under the cluster secret (cluster_auth.hpp),
// one per direction, so the secret never crosses the wire and each side knows the
// other holds it. The session token both sides then use is derived the same way;
// only a node with no secret (loopback only) sends it.
// Thread contract: plain values.

#include <canopy/backends/backend.hpp>
#include <canopy/backends/backend_factory.hpp>
#include <canopy/messages/actor_interfaces.hpp>
#include <canopy/messages/pass_messages.hpp>

#include <caf/meta/type_name.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace canopy::messages {

/// Bumped whenever a message between front and node changes. Both sides refuse to
/// work with another version, naming both.
inline constexpr std::uint32_t protocol_version = 1;

struct node_hello {
  std::uint32_t protocol = protocol_version;
  std::vector<std::uint8_t> nonce; // the front's, fresh for every attempt
  worker_link_actor link;          // the gate monitors it: its session ends with it
};

struct node_challenge {
  std::uint32_t protocol = protocol_version;
  std::vector<std::uint8_t> nonce; // the node's, fresh for every hello
  std::vector<std::uint8_t> proof; // the node's proof of the secret; empty: it has none
};

/// One device of a node, as a front admits it.
struct device_announcement {
  node_device_actor handle;
  std::string device; // "cpu", "cuda:0", ...
  backends::model_info model;
  std::uint64_t kv_budget_bytes = 0; // what the front's cache may keep on it
  backends::backend_spec spec;       // what the node loaded
};

struct node_announcement {
  std::uint64_t session = 0; // with no secret, the session's token; else 0 (both
                             // sides derive it from the nonces)
  std::vector<device_announcement> devices;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_hello& x) {
  return f(caf::meta::type_name("node_hello"), x.protocol, x.nonce, x.link);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_challenge& x) {
  return f(caf::meta::type_name("node_challenge"), x.protocol, x.nonce, x.proof);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, device_announcement& x) {
  return f(caf::meta::type_name("device_announcement"), x.handle, x.device, x.model,
           x.kv_budget_bytes, x.spec);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_announcement& x) {
  return f(caf::meta::type_name("node_announcement"), x.session, x.devices);
}

} // namespace canopy::messages
