#pragma once
// The middleman actor through which fronts connect to worker nodes, and nodes publish
// their gates, over TLS: CAF's io layer (its BASP broker, multiplexer and streams) with
// CAF's OpenSSL sessions, as caf::openssl::manager's own middleman actor, except that
// every OpenSSL call starts with the calling thread's error queue empty.
//
// Note [TLS error queue]: OpenSSL keeps errors in a per-thread queue, and SSL_get_error
// reports any queued error as the outcome of the call it is asked about. CAF 0.17.6's
// sessions empty that queue only when they log, and Debian builds CAF with logging
// compiled out: one failed handshake (a stranger's bytes, a plain peer) left its error
// behind, and the next read on any other TLS connection of the same multiplexer thread
// that merely would block was taken for a failure, dropping that connection. Emptying
// the queue before each call is what OpenSSL's SSL_get_error documentation requires.
//
// Thread contract: spawn_tls_middleman may be called from any thread. The actor runs on
// a thread of its own (detached, like CAF's middleman actors: connecting blocks), and
// like them ignores exit messages but exit_reason::kill, which its owner must send it
// when done: the actor system's destructor waits for it.
// Requires caf::openssl::manager loaded (configure_actor_system does it for TLS).

#include <caf/actor_system.hpp>
#include <caf/io/middleman_actor.hpp>

namespace canopy::actors {

caf::io::middleman_actor spawn_tls_middleman(caf::actor_system& system);

} // namespace canopy::actors
