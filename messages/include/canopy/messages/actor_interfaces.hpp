#pragma once
// The catalogue: every typed actor interface of Canopy, one comment per handler.
// A query flows  caller -> engine_actor (a request actor) -> cache_actor
//   hit:  cache_actor sends the row back to the request actor;
//   miss: cache_actor forwards it to batcher_actor, which merges duplicates, asks the
//         cache to prepare (match + lock) a batch, runs it on a worker_actor, hands
//         the results to the cache to store, and answers every waiter.
// Answers travel back as (answer_atom, ticket, row | error) messages to an
// answer_sink, not as CAF responses: a request actor may have thousands of queries
// in flight, and CAF 0.17 keeps one response handler per outstanding request in a
// flat vector, erased in O(n) per reply.
// INTERNAL marks messages an actor sends to itself.
// Thread contract: handles are values; send from any thread.

#include <canopy/backends/backend.hpp>
#include <canopy/cache/types.hpp>
#include <canopy/messages/atoms.hpp>
#include <canopy/messages/batch_messages.hpp>
#include <canopy/messages/cache_view_messages.hpp>
#include <canopy/messages/computed_pass.hpp>
#include <canopy/messages/next_byte_messages.hpp>
#include <canopy/messages/pass_messages.hpp>
#include <canopy/messages/query.hpp>
#include <canopy/messages/reply_callback.hpp>
#include <canopy/messages/shared_logprobs.hpp>
#include <canopy/messages/worker_description.hpp>

#include <caf/replies_to.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace canopy::messages {

// The handshake's messages (node_messages.hpp, which includes this catalogue).
struct node_hello;
struct node_challenge;
struct node_announcement;

/// Where answers go: a request actor, which knows each query by its ticket.
using answer_sink = caf::typed_actor<
    // The row for ticket N.
    caf::reacts_to<answer_atom, std::uint64_t, shared_logprobs>,
    // The error for ticket N.
    caf::reacts_to<answer_atom, std::uint64_t, caf::error>,
    // The rows of several tickets: one message per computed batch and request actor.
    caf::reacts_to<answer_atom, answer_batch>>;

/// One per device; spawned detached, because a pass blocks its thread. On a worker
/// node the engine holds a local proxy with this interface instead (remote_worker).
using worker_actor = caf::typed_actor<
    // Runs one forward pass, its rows encoded in the given dtype; a backend exception
    // becomes errc::backend_failure.
    caf::replies_to<run_atom, backends::pass_request,
                    cache::row_dtype>::with<computed_pass>,
    // Frees KV entries the cache dropped.
    caf::reacts_to<free_kv_atom, std::vector<cache::kv_handle>>,
    // Moves KV entries the cache demoted to the worker's host tier.
    caf::reacts_to<demote_kv_atom, std::vector<cache::kv_handle>>,
    // Describes the model this worker runs.
    caf::replies_to<info_atom>::with<backends::model_info>,
    // Loads a LoRA adapter under a key (the engine's name for this loading of it) for
    // pass items naming the key; a refusal is errc::invalid_request naming why.
    caf::replies_to<adapter_atom, std::string, backends::lora_adapter_files>::with<bool>,
    // Unloads the adapter under the key; KV made under it is the cache's to free.
    caf::reacts_to<adapter_atom, std::string>>;

/// One per entry of remote_workers, on the front: connects to a worker node, proves the
/// cluster secret, makes its devices join through local proxies (worker_actor handles),
/// sends heartbeats, and on a loss removes them and connects again with backoff.
using worker_link_actor = caf::typed_actor<
    // From the node's gate: the node leaves; its workers take no new pass.
    caf::reacts_to<drain_atom>,
    // From the node's gate, last before it closes: everything it sent has arrived.
    caf::replies_to<leave_atom>::with<bool>,
    // INTERNAL: time for attempt N to connect.
    caf::reacts_to<connect_atom, std::uint64_t>,
    // INTERNAL: time for session N's next heartbeat.
    caf::reacts_to<ping_atom, std::uint64_t>,
    // Answered once the first attempt has concluded: admitted, refused or unreachable.
    caf::replies_to<wait_atom>::with<bool>>;

/// One per device on a worker node (`canopy worker`), detached. Every message names the
/// session it belongs to; the device serves only open sessions, and a pass may build
/// only on KV its own session made. Messages of the node's own actors carry the node's
/// owner key, a random number that never leaves the process: a remote peer can make a
/// message look as if it came from this node (CAF 0.17's routed messages name their
/// source), but it cannot know the key.
using node_device_actor = caf::typed_actor<
    // Runs one forward pass for the session (worker_actor's run).
    caf::replies_to<run_atom, std::uint64_t, backends::pass_request,
                    cache::row_dtype>::with<computed_pass>,
    // Frees KV entries the session's cache dropped.
    caf::reacts_to<free_kv_atom, std::uint64_t, std::vector<cache::kv_handle>>,
    // Moves KV entries the session's cache demoted to the host tier.
    caf::reacts_to<demote_kv_atom, std::uint64_t, std::vector<cache::kv_handle>>,
    // With the owner key (from the gate): opens (true) or closes (false) a session;
    // closing frees the session's KV and answers how many entries that was.
    caf::replies_to<session_atom, std::uint64_t, std::uint64_t,
                    bool>::with<std::uint64_t>,
    // With the owner key: finish what the mailbox holds, then stop.
    caf::reacts_to<drain_atom, std::uint64_t>,
    // Loads an adapter for the session (worker_actor's); it is the session's alone, and
    // unloaded when the session ends.
    caf::replies_to<adapter_atom, std::uint64_t, std::string,
                    backends::lora_adapter_files>::with<bool>,
    // Unloads one of the session's adapters.
    caf::reacts_to<adapter_atom, std::uint64_t, std::string>>;

/// A worker node's published actor: the only one a stranger can reach.
using node_gate_actor = caf::typed_actor<
    // A front's first message: its protocol, nonce and link. Answered with the node's
    // protocol, nonce and proof of the cluster secret; refused while the node leaves.
    caf::replies_to<hello_atom, node_hello>::with<node_challenge>,
    // The front's proof of the cluster secret. Admitted: the node's devices and the
    // session they serve it under; a session the same link had before ends.
    caf::replies_to<auth_atom, std::vector<std::uint8_t>>::with<node_announcement>,
    // A heartbeat of an open session.
    caf::replies_to<ping_atom, std::uint64_t>::with<bool>,
    // With the owner key: tells the fronts, lets the devices finish, and answers once
    // the fronts have everything the node sent.
    caf::replies_to<drain_atom, std::uint64_t>::with<bool>>;

/// Merges duplicate queries and dispatches batches to workers.
using batcher_actor = caf::typed_actor<
    // A cache miss: answered to the sink once computed; equal sequences of one partition
    // share one computation. The node is the query's whole sequence in the trie, locked
    // by the cache for this query (root_node when the cache is off); the batcher gives
    // the lock back (release) once the query leaves it.
    caf::reacts_to<enqueue_atom, query, std::uint64_t, answer_sink, cache::node_id>,
    // INTERNAL: the flush timer fired; the first waiting query's window may be over.
    caf::reacts_to<flush_atom>,
    // INTERNAL: the pass watchdog; fails the batches whose pass outlived pass_timeout.
    caf::reacts_to<timeout_atom>,
    // INTERNAL: the queries that were in the mailbox with the first one are enqueued;
    // an idle worker may take them now (flush_when_idle).
    caf::reacts_to<idle_atom>,
    // Withdraws waiters (their sink, tickets, and the queries whose partition and
    // sequence name their entries) whose callers cancelled; an entry left with nobody
    // waiting is dropped when its turn comes, not computed.
    caf::reacts_to<cancel_atom, answer_sink, std::vector<std::uint64_t>,
                   std::vector<query>>,
    // reset_async_queries(): every waiting query gets errc::cancelled.
    caf::replies_to<cancel_atom>::with<bool>,
    // Admits a worker: it must serve the engine's model (architecture, vocabulary,
    // context, dtype, fingerprint), else the error names both sides. It gets a slot
    // (the one it names when it comes back after a loss), is monitored, and takes
    // passes at once. Its loss is its handle going down: its passes are re-dispatched.
    caf::replies_to<join_atom, worker_actor, worker_description>::with<cache::worker_id>,
    // The worker in this slot is leaving: it takes no new pass and finishes its own.
    caf::reacts_to<drain_atom, cache::worker_id>,
    // Answered in its turn: a sender knows the messages it sent before (the engine's
    // joins of its in-process workers, say) are handled.
    caf::replies_to<ping_atom>::with<bool>,
    // The reference path (no cache, no batching, no KV kept), answered to the sink.
    caf::reacts_to<uncached_atom, cache::token_seq, std::uint64_t, answer_sink>,
    // Loads an adapter on every worker under its key, and on every worker that joins
    // later; answered once all have it, or with the first refusal (then none keeps it).
    // Refused when the adapters held for joiners would pass the adapters' budget.
    caf::replies_to<adapter_atom, std::string, backends::lora_adapter_files>::with<bool>,
    // Unloads it everywhere; the queries under it still waiting get
    // errc::unknown_adapter.
    caf::replies_to<adapter_atom, std::string>::with<bool>>;

/// Owns the token trie, its eviction policy and byte budgets.
using cache_actor = caf::typed_actor<
    // A hit answers the sink with the cached row; a miss locks its sequence's node
    // (made if missing), so its prefix stays while it waits, and goes to the batcher.
    caf::reacts_to<lookup_atom, query, std::uint64_t, answer_sink>,
    // Reports, for the locked nodes of a batch, which are answerable now and each
    // worker's KV prefix of the rest.
    caf::replies_to<prepare_atom, prepare_request>::with<prepared_batch>,
    // Stores a pass's rows and KV on the batch's locked paths; answers the rows of
    // every item.
    caf::replies_to<store_atom, store_request>::with<std::vector<shared_logprobs>>,
    // Keeps the answer's extra (next-byte masses a request actor made) beside the
    // row of the query's sequence, when that node still holds the very row.
    caf::reacts_to<keep_atom, query, shared_logprobs>,
    // Gives back locks taken by lookups (one per element).
    caf::reacts_to<release_atom, std::vector<cache::node_id>>,
    // A worker was lost: its KV handles are void.
    caf::reacts_to<forget_atom, cache::worker_id>,
    // A worker took this slot (new, or back after its loss with no KV): where to free
    // its KV, and the budget and bytes per token of what the cache keeps on it.
    caf::reacts_to<join_atom, cache::worker_id, worker_actor, worker_description>,
    // Wiring, sent once before any query: the batcher that misses are forwarded to.
    caf::reacts_to<connect_atom, batcher_actor>,
    // Passes a withdrawal on to the batcher. It travels the path the misses took, so
    // it reaches the batcher after the queries it withdraws.
    caf::reacts_to<cancel_atom, answer_sink, std::vector<std::uint64_t>,
                   std::vector<query>>,
    // Drops every unlocked row and KV entry of the partitions whose names start with the
    // string ("": all).
    caf::replies_to<clear_atom, std::string>::with<bool>,
    // Drops every unlocked KV entry of those partitions.
    caf::replies_to<clear_kv_atom, std::string>::with<bool>,
    // Names a loaded adapter (name, key): lookups naming it are computed under the key
    // from now on. errc::invalid_request when the name is taken.
    caf::replies_to<adapter_atom, std::string, std::string>::with<bool>,
    // Forgets the name: lookups naming it get errc::unknown_adapter from now on, and
    // every unlocked row and KV entry under it is dropped. Answers the key it had
    // (errc::unknown_adapter when none).
    caf::replies_to<adapter_atom, std::string>::with<std::string>,
    // The names of the adapters loaded, in order.
    caf::replies_to<adapters_atom>::with<std::vector<std::string>>,
    // The node of the query's tokens (the root for none) in its scope (partition and
    // adapter) and the nodes within the limits below it (token_trie::view).
    caf::replies_to<view_atom, query, cache::trie_view_limits>::with<cache::trie_view>>;

/// The front door: a request actor. Hosts that run their own actor system talk to
/// the engine through this handle.
using engine_actor = answer_sink::extend<
    // INTERNAL: the earliest query deadline may have passed.
    caf::reacts_to<timeout_atom>,
    // INTERNAL: answers held back (Note [answer bursts]) go out.
    caf::reacts_to<flush_atom>,
    // Next-token log-probs after the sequence (validated, cached, batched).
    caf::replies_to<logprobs_atom, cache::token_seq>::with<shared_logprobs>,
    // The same with a priority, a deadline, or the cache_kv() requirement.
    caf::replies_to<logprobs_atom, query>::with<shared_logprobs>,
    // The same, answered through a callback (in-process callers only).
    caf::reacts_to<logprobs_atom, query, reply_callback>,
    // The same, answered as (answer_atom, id, row | error) to the caller's sink, with no
    // response handler per query: for callers with thousands in flight (the HTTP
    // gateway). Ids are the caller's own.
    caf::reacts_to<logprobs_atom, query, std::uint64_t, answer_sink>,
    // The distribution over the next byte after the sequence and a byte prefix
    // (next_byte_messages.hpp): the sequence's row is found or computed as a query's,
    // then answered from the masses kept beside it (made and kept on the first call).
    // errc::no_tokenizer when the model has none.
    caf::replies_to<next_byte_atom,
                    next_byte_query>::with<backends::next_byte_distribution>,
    // The same, answered through a callback (in-process callers only).
    caf::reacts_to<next_byte_atom, next_byte_query, next_byte_reply>,
    // The same, answered to the caller's sink under its own id, cancellable by it with
    // the cancel message below (the sink's address is what names it).
    caf::reacts_to<next_byte_atom, next_byte_query, std::uint64_t, next_byte_sink>,
    // Cancels the sink's queries with these ids: each is answered errc::cancelled now,
    // and one nobody else waits for is not computed.
    caf::reacts_to<cancel_atom, answer_sink, std::vector<std::uint64_t>>,
    // The same for a next-byte sink's queries.
    caf::reacts_to<cancel_atom, next_byte_sink, std::vector<std::uint64_t>>,
    // The reference path: no cache, no batching, no KV kept.
    caf::replies_to<uncached_atom, cache::token_seq>::with<shared_logprobs>,
    // The reference path, answered through a callback.
    caf::reacts_to<uncached_atom, cache::token_seq, reply_callback>,
    // Drops every unlocked cached row and KV entry of the partitions whose names start
    // with the string ("": all).
    caf::replies_to<clear_atom, std::string>::with<bool>,
    // Drops every unlocked KV entry of those partitions.
    caf::replies_to<clear_kv_atom, std::string>::with<bool>,
    // Cancels every waiting query (reset_async_queries).
    caf::replies_to<cancel_atom>::with<bool>,
    // Part of the cache, for people to read: the node of the query's tokens (none: the
    // root) in its partition, under its adapter, and the nodes within the limits below.
    caf::replies_to<view_atom, query, cache::trie_view_limits>::with<cache::trie_view>,
    // The model the engine serves.
    caf::replies_to<info_atom>::with<backends::model_info>>;

} // namespace canopy::messages
