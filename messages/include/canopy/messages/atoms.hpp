#pragma once
// Atoms naming every handler of the actor catalogue (at most 10 characters each).
// Thread contract: compile-time constants.

#include <caf/atom.hpp>

namespace canopy::messages {

using logprobs_atom = caf::atom_constant<caf::atom("logprobs")>;   // a caller's query
using next_byte_atom = caf::atom_constant<caf::atom("next_byte")>; // a byte query
using uncached_atom = caf::atom_constant<caf::atom("uncached")>;   // the reference path
using lookup_atom = caf::atom_constant<caf::atom("lookup")>;       // request -> cache
using enqueue_atom = caf::atom_constant<caf::atom("enqueue")>; // cache -> batcher (miss)
using prepare_atom = caf::atom_constant<caf::atom("prepare")>; // batcher -> cache
using store_atom = caf::atom_constant<caf::atom("store")>;     // batcher -> cache
using keep_atom = caf::atom_constant<caf::atom("keep")>;       // request -> cache
using release_atom = caf::atom_constant<caf::atom("release")>; // batcher -> cache
using forget_atom = caf::atom_constant<caf::atom("forget")>;   // batcher -> cache
using run_atom = caf::atom_constant<caf::atom("run")>;         // -> worker
using free_kv_atom = caf::atom_constant<caf::atom("free_kv")>; // cache -> worker
using demote_kv_atom = caf::atom_constant<caf::atom("demote_kv")>; // cache -> worker
using info_atom = caf::atom_constant<caf::atom("info")>;           // -> worker, front
using clear_atom = caf::atom_constant<caf::atom("clear")>;         // -> cache
using clear_kv_atom = caf::atom_constant<caf::atom("clear_kv")>;   // -> cache
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;       // -> batcher
using flush_atom = caf::atom_constant<caf::atom("flush")>;     // batcher, front -> itself
using connect_atom = caf::atom_constant<caf::atom("connect")>; // wiring at start
using answer_atom = caf::atom_constant<caf::atom("answer")>;   // -> request actor
using timeout_atom = caf::atom_constant<caf::atom("timeout")>; // deadlines, to oneself
using idle_atom = caf::atom_constant<caf::atom("idle")>;       // batcher -> itself
using join_atom = caf::atom_constant<caf::atom("join")>;   // a worker -> batcher, cache
using drain_atom = caf::atom_constant<caf::atom("drain")>; // a leaving worker
using hello_atom = caf::atom_constant<caf::atom("hello")>; // front -> node: handshake
using auth_atom = caf::atom_constant<caf::atom("auth")>;   // front -> node: proof
using ping_atom = caf::atom_constant<caf::atom("ping")>;   // heartbeats, barriers
using session_atom = caf::atom_constant<caf::atom("session")>;   // node gate -> devices
using leave_atom = caf::atom_constant<caf::atom("leave")>;       // node -> front, last
using wait_atom = caf::atom_constant<caf::atom("wait")>;         // engine -> its links
using adapter_atom = caf::atom_constant<caf::atom("adapter")>;   // adapters: add, remove
using adapters_atom = caf::atom_constant<caf::atom("adapters")>; // -> cache: the list
using view_atom = caf::atom_constant<caf::atom("view")>; // -> cache: part of the trie
using poll_atom = caf::atom_constant<caf::atom("poll")>; // a worker -> itself: rows?

} // namespace canopy::messages
