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
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
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

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, next_byte_query& x) {
  return f(caf::meta::type_name("next_byte_query"), x.tokens, x.prefix, x.reduce);
}

} // namespace canopy::messages

namespace canopy::backends {

// The EOS value travels as a flag and a number (CAF 0.17 knows no std::optional).
template <class Inspector>
typename std::enable_if<Inspector::reads_state, typename Inspector::result_type>::type
inspect(Inspector& f, const next_byte_distribution& x) {
  auto logprobs = x.logprobs;
  const bool has_eos = x.eos.has_value();
  const double eos = x.eos.value_or(0.0);
  auto end_of_token = x.end_of_token;
  auto log_mass = x.log_mass;
  return f(caf::meta::type_name("next_byte_distribution"), logprobs, end_of_token,
           has_eos, eos, log_mass);
}

template <class Inspector>
typename std::enable_if<Inspector::writes_state, typename Inspector::result_type>::type
inspect(Inspector& f, next_byte_distribution& x) {
  bool has_eos = false;
  double eos = 0;
  auto settle = [&]() -> caf::error {
    x.eos = has_eos ? std::optional<double>(eos) : std::nullopt;
    return caf::none;
  };
  return f(caf::meta::type_name("next_byte_distribution"), x.logprobs, x.end_of_token,
           has_eos, eos, x.log_mass, caf::meta::load_callback(settle));
}

} // namespace canopy::backends

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(canopy::messages::next_byte_reply)
