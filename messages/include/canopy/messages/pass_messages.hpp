#pragma once
// Serialization of what crosses to a worker: the backend's pass structs, the model
// description a worker announces, the backend description it starts from, and the
// LoRA adapters it loads. The
// inspect() overloads live in the types' own namespaces (ADL) so that backends/ stays
// free of CAF.
// Thread contract: plain values.

#include <canopy/backends/backend.hpp>
#include <canopy/backends/backend_factory.hpp>
#include <canopy/cache/logprob_row.hpp>
#include <canopy/cache/token_trie.hpp>

#include <caf/meta/type_name.hpp>

namespace canopy::backends {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pass_item& x) {
  return f(caf::meta::type_name("pass_item"), x.prefix, x.prefix_length, x.tokens, x.rows,
           x.keep_kv, x.adapter);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pass_request& x) {
  return f(caf::meta::type_name("pass_request"), x.items);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, model_info& x) {
  return f(caf::meta::type_name("model_info"), x.name, x.architecture, x.vocab_size,
           x.context_length, x.kv_window, x.dtype, x.weight_dtype, x.weight_bytes,
           x.step_weight_bytes, x.weight_kernels, x.kv_dtype, x.fingerprint,
           x.kv_bytes_per_token, x.kv_keep_bytes, x.kv_host_keep_bytes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, mock_options& x) {
  return f(caf::meta::type_name("mock_options"), x.vocab_size, x.context_length,
           x.kv_window, x.kv_bytes_per_token, x.seed, x.cost_per_pass, x.cost_per_token);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, torch_options& x) {
  return f(caf::meta::type_name("torch_options"), x.dtype, x.weight_dtype, x.kv_dtype,
           x.kv_residual_tokens, x.kv_host_budget_bytes, x.kv_host_dtype,
           x.kv_budget_bytes, x.threads, x.max_context_length, x.adapter_budget_bytes,
           x.direct_forward, x.decode_graphs);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, lora_adapter_files& x) {
  return f(caf::meta::type_name("lora_adapter_files"), x.source, x.config_json,
           x.weights);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, backend_spec& x) {
  return f(caf::meta::type_name("backend_spec"), x.kind, x.device, x.model, x.mock,
           x.torch);
}

} // namespace canopy::backends

namespace canopy::cache {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kv_prefix& x) {
  return f(caf::meta::type_name("kv_prefix"), x.length, x.handle);
}

} // namespace canopy::cache
