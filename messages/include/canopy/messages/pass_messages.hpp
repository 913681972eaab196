#pragma once
// Serialization of what crosses to a worker: the backend's pass structs and model
// description. The inspect() overloads live in the types' own namespaces (ADL) so
// that backends/ stays free of CAF.
// Thread contract: plain values.

#include <canopy/backends/backend.hpp>
#include <canopy/cache/token_trie.hpp>

#include <caf/meta/type_name.hpp>

namespace canopy::backends {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pass_item& x) {
  return f(caf::meta::type_name("pass_item"), x.prefix, x.prefix_length, x.tokens, x.rows,
           x.keep_kv);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pass_request& x) {
  return f(caf::meta::type_name("pass_request"), x.items);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, item_output& x) {
  return f(caf::meta::type_name("item_output"), x.kv, x.logprobs);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pass_result& x) {
  return f(caf::meta::type_name("pass_result"), x.items, x.tokens_computed, x.matmul_flops,
           x.compute_ns);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, model_info& x) {
  return f(caf::meta::type_name("model_info"), x.name, x.vocab_size, x.context_length,
           x.kv_bytes_per_token, x.kv_keep_bytes);
}

} // namespace canopy::backends

namespace canopy::cache {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kv_prefix& x) {
  return f(caf::meta::type_name("kv_prefix"), x.length, x.handle);
}

} // namespace canopy::cache
