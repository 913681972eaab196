#pragma once
// What a worker answers for one pass: per item, the KV handles of its new tokens and
// its rows. In-process, the rows are the backend's float32 values as they came out,
// and the cache makes stored rows of them on its own thread (the worker's thread,
// which the next pass waits for, does no more than compute). Serialized, each row is
// encoded in the dtype the pass asked for, so a remote worker sends float16 rows at
// half the bytes and the front stores them as they arrive. No tensor crosses: handles
// are integers, rows are bytes with their dtype.
// Thread contract: plain values; rows are immutable and shared.

#include <canopy/cache/logprob_row.hpp>
#include <canopy/cache/types.hpp>
#include <canopy/messages/shared_logprobs.hpp>

#include <caf/meta/type_name.hpp>

#include <cstdint>
#include <type_traits>
#include <vector>

namespace canopy::messages {

struct computed_item {
  std::vector<cache::kv_handle> kv;  // [new tokens] when kept, else empty; no_kv for
                                     // the tail the backend had no room to keep
  std::vector<float> values;         // in-process: [rows * vocab], row-major
  std::vector<shared_logprobs> rows; // after crossing a process boundary: [rows]
};

struct computed_pass {
  std::vector<computed_item> items;                   // [pass items], in request order
  cache::row_dtype dtype = cache::row_dtype::float32; // of the rows, once encoded
  std::uint64_t vocab = 0;                            // entries per row
  std::uint64_t tokens_computed = 0; // exactly the new tokens the backend computed
  std::uint64_t matmul_flops = 0;    // of the pass's matrix products (0: not a model)
  std::uint64_t compute_ns = 0;      // time the backend spent on the pass
};

/// The item's rows in the pass's dtype: the encoded ones, or rows made of its values
/// (`pass.vocab` each), which it gives up. Throws std::invalid_argument when the
/// values are not whole rows.
std::vector<shared_logprobs> take_rows(computed_item& item, const computed_pass& pass);

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, computed_item& x) {
  return f(caf::meta::type_name("computed_item"), x.kv, x.rows);
}

template <class Inspector>
typename std::enable_if<Inspector::reads_state, typename Inspector::result_type>::type
inspect(Inspector& f, const computed_pass& x) {
  // Encoded here, on the worker's node, so that only the asked dtype's bytes travel.
  auto items = x.items;
  for (auto& item : items)
    item.rows = take_rows(item, x);
  return f(caf::meta::type_name("computed_pass"), items, x.dtype, x.vocab,
           x.tokens_computed, x.matmul_flops, x.compute_ns);
}

template <class Inspector>
typename std::enable_if<Inspector::writes_state, typename Inspector::result_type>::type
inspect(Inspector& f, computed_pass& x) {
  return f(caf::meta::type_name("computed_pass"), x.items, x.dtype, x.vocab,
           x.tokens_computed, x.matmul_flops, x.compute_ns);
}

} // namespace canopy::messages
