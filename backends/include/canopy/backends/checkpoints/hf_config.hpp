#pragma once
// HF config.json <-> model_config, for the architectures the models implement:
// LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM (one
// Llama-style model with the features each adds: rope_scaling linear or llama3,
// Mistral's sliding window, Qwen2's q/k/v biases, Qwen3's per-head q/k RMSNorm) and
// GPT2LMHeadModel. Reading applies HF's own defaults for absent keys (num_key_value_heads
// = heads, head_dim = hidden / heads but 128 for Qwen3, rms_norm_eps 1e-6, rope_theta
// 10000, tie_word_embeddings false, Mistral's sliding_window 4096; GPT2Config: n_inner =
// 4 * n_embd, layer_norm_epsilon 1e-5, activation gelu_new, tie_word_embeddings true)
// and refuses, by key, settings that change the math in ways the models do not
// implement (other rope_scaling types, other activations, o_proj or MLP biases, Qwen's
// per-layer windows, logit soft-capping and the like, gpt2 attention scaling variants).
// Thread contract: pure functions.

#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/checkpoints/model_config.hpp>

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
