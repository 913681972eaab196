#pragma once
// The middleman actor through which fronts connect to worker nodes and nodes publish
// their gates: CAF's io layer (its BASP broker, multiplexer and streams), with every
// connection behind connection_gate.hpp's challenge-response, run on the raw bytes
// before any reach BASP; over TLS (CAF's OpenSSL sessions, mutual: each side's
// certificate checked against tls_ca) when configured.
//
// A connection that has not passed the gate holds what BASP wrote for it (its handshake)
// and reads only what the gate wants. One that has not passed within `handshake_timeout`
// is closed, and so is the oldest when `max_pending` connections are waiting at once, so
// a stranger holds a bounded number of sockets and a few KiB each.
//
// Note [TLS error queue]: OpenSSL keeps errors in a per-thread queue, and SSL_get_error
// reports any queued error as the outcome of the call it is asked about. CAF 0.17.6's
// sessions empty that queue only when they log, and Debian builds CAF with logging
// compiled out: one failed handshake (a stranger's bytes, a plain peer) left its error
// behind, and the next read on any other TLS connection of the same multiplexer thread
// that merely would block was taken for a failure, dropping that connection. Emptying
// the queue before each call is what OpenSSL's SSL_get_error documentation requires.
//
// Thread contract: spawn_cluster_middleman may be called from any thread. The actor runs
// on a thread of its own (detached, like CAF's middleman actors: connecting blocks), and
// like them ignores exit messages but exit_reason::kill, which its owner must send it
// when done: the actor system's destructor waits for it. Connections live on CAF's
// multiplexer thread. With TLS, needs caf::openssl::manager loaded
// (configure_actor_system does it).

#include <caf/actor_system.hpp>
#include <caf/io/middleman_actor.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace canopy::actors {

struct gate_settings {
  std::string secret; // the cluster token ("" on loopback without one)
  bool tls = false;
  std::chrono::milliseconds handshake_timeout{5000};
  std::size_t max_pending = 256; // connections waiting at the gate at once
  /// Called, on the multiplexer's thread, for each connection the gate turned away:
  /// the peer (peer_label: as connected to, or the address accepted from) and why, as
  /// it follows "the node at <peer> " (fronts) or "a peer at <peer> " (nodes).
  std::function<void(const std::string& peer, const std::string& why)> on_refused;
};

/// "host:port" of a peer, as gate_settings::on_refused names it.
std::string peer_label(const std::string& host, std::uint16_t port);

/// The gate's last word on each peer a front connected to, so that a link whose connect
/// failed can say why (the middleman reports only that the connection failed).
/// Thread contract: any thread.
class gate_refusals {
public:
  void record(const std::string& peer, const std::string& why);
  /// The last refusal of `peer` since the last take, "" if none.
  std::string take(const std::string& peer);

private:
  std::mutex mutex_;
  std::map<std::string, std::string> last_;
};

caf::io::middleman_actor spawn_cluster_middleman(caf::actor_system& system,
                                                 gate_settings settings);

} // namespace canopy::actors
