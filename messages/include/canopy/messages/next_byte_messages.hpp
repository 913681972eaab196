#pragma once
// Next-byte queries (issue 30): the distribution over the next byte after a token
// sequence and a byte prefix, answered from the sequence's row and the masses kept
// beside it (backends/tokenizers/next_byte.hpp). The answer is 256 numbers and three
// more, not the row: what a byte-level client needs, without a row on the wire.
// Thread contract: plain values; the callback runs once on a request actor's thread.

#include <canopy/backends/tokenizers/next_byte.hpp>
#include <canopy/messages/atoms.hpp>
#include <canopy/messages/query.hpp>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <functional>
#include <string>

namespace canopy::messages {

struct next_byte_query {
  query tokens;       // the sequence, with the query's priority, deadline and partition
  std::string prefix; // the bytes of the token being spelled so far (any bytes)
  backends::byte_reduce reduce = backends::byte_reduce::sum;
};

/// A next-byte answer through a callback (in-process callers only).
struct next_byte_reply {
  std::function<void(caf::expected<backends::next_byte_distribution>)> fn;
};

/// Where next-byte answers go under a caller's own ids (the HTTP gateway), as
/// answer_sink's rows do; cancelled like them, by (sink, ids).
using next_byte_sink = caf::typed_actor<
    caf::reacts_to<answer_atom, std::uint64_t, backends::next_byte_distribution>,
    caf::reacts_to<answer_atom, std::uint64_t, caf::error>>;

} // namespace canopy::messages

// In-process only, never serialized: next-byte queries are answered on the front that
// takes them (workers compute rows), and CAF 0.17's binary serializer loops forever on
// an infinite double, which a distribution holds for every byte no token starts with.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(canopy::messages::next_byte_query)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(canopy::backends::next_byte_distribution)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(canopy::messages::next_byte_reply)
