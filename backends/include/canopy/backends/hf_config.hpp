#pragma once
// HF config.json <-> model_config, for the two architectures the models implement:
// LlamaForCausalLM (model_type "llama") and GPT2LMHeadModel (model_type "gpt2").
// Reading applies HF's own defaults for absent keys (LlamaConfig: num_key_value_heads
// = heads, head_dim = hidden / heads, rms_norm_eps 1e-6, rope_theta 10000,
// tie_word_embeddings false; GPT2Config: n_inner = 4 * n_embd, layer_norm_epsilon 1e-5,
// activation gelu_new, tie_word_embeddings true) and refuses settings that change the
// math in ways the models do not implement (rope_scaling, other activations, biases
// on llama projections, gpt2 attention scaling variants) with a message saying so.
// Thread contract: pure functions.

#include <canopy/backends/checkpoint.hpp>
#include <canopy/backends/model_config.hpp>

#include <string>
#include <string_view>

namespace canopy::backends {

/// Parses config.json text; the result is validated (validate_model_config) and has
/// rope = rotate_half. Throws checkpoint_error naming `file_name` and the key.
model_config parse_hf_config(std::string_view json_text, const std::string& file_name);

/// A config.json that parse_hf_config (and HF transformers) reads back as `config`,
/// with "torch_dtype" from `dtype`. It always describes rotate_half RoPE: a writer of
/// an interleaved checkpoint permutes q/k rows (see checkpoint_writer.hpp).
std::string hf_config_json(const model_config& config, weight_dtype dtype);

} // namespace canopy::backends
