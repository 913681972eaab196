#pragma once
// A log-prob row in a message. In-process sends share the cache's row (no copy);
// serialization writes dtype, vocab and the stored bytes, so rows can cross machines.
// Thread contract: the row is immutable; the handle is a plain value.

#include <canopy/cache/logprob_row.hpp>
#include <canopy/cache/row_extra.hpp>

#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>

#include <cstdint>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace canopy::messages {

struct shared_logprobs {
  cache::row_ptr row; // null only where a field is optional (prepared_entry::hit)
  // What the trie keeps beside the row (the next-byte masses), when a hit found one.
  // In-process only: not serialized (a receiver computes its own).
  cache::row_extra_ptr extra{};
};

/// The rows of several queries of one request actor, sent as one message.
struct answer_batch {
  std::vector<std::uint64_t> tickets;
  std::vector<shared_logprobs> rows; // [tickets]
};

template <class Inspector>
typename std::enable_if<Inspector::reads_state, typename Inspector::result_type>::type
inspect(Inspector& f, const shared_logprobs& x) {
  auto dtype =
      static_cast<std::uint8_t>(x.row ? x.row->dtype() : cache::row_dtype::float32);
  std::uint64_t vocab = x.row ? x.row->vocab() : 0;
  std::vector<std::uint8_t> bytes;
  if (x.row)
    bytes.assign(x.row->raw(), x.row->raw() + x.row->bytes());
  return f(caf::meta::type_name("shared_logprobs"), dtype, vocab, bytes);
}

template <class Inspector>
typename std::enable_if<Inspector::writes_state, typename Inspector::result_type>::type
inspect(Inspector& f, shared_logprobs& x) {
  std::uint8_t dtype = 0;
  std::uint64_t vocab = 0;
  std::vector<std::uint8_t> bytes;
  auto adopt = [&]() -> caf::error {
    if (vocab == 0) { // an absent row (e.g. prepared_entry::hit of a miss)
      x.row = nullptr;
      return caf::none;
    }
    if (dtype > static_cast<std::uint8_t>(cache::row_dtype::bfloat16))
      return caf::make_error(caf::sec::invalid_argument, "shared_logprobs: bad dtype");
    try {
      x.row = cache::logprob_row::adopt(static_cast<cache::row_dtype>(dtype), vocab,
                                        std::move(bytes));
    } catch (const std::invalid_argument& e) {
      return caf::make_error(caf::sec::invalid_argument, e.what());
    }
    return caf::none;
  };
  return f(caf::meta::type_name("shared_logprobs"), dtype, vocab, bytes,
           caf::meta::load_callback(adopt));
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, answer_batch& x) {
  return f(caf::meta::type_name("answer_batch"), x.tickets, x.rows);
}

} // namespace canopy::messages
