#pragma once
// What a transformer checkpoint is, independent of the file it came from: the
// architecture, its shapes and constants, and the features that change its arithmetic.
// Loaders fill it from config.json or a llama2.c header; the LibTorch models read it;
// make-model writes it.
// Thread contract: a plain value.

#include <canopy/cache/enum_names.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace canopy::backends {

/// What config.json names. Every one but gpt2 is a Llama-style decoder (RMSNorm,
/// rotary embeddings, grouped-query attention, SwiGLU) that differs from Llama only by
/// the features model_config spells out, so one model implements them all.
enum class architecture { llama, mistral, qwen2, qwen3, gpt2 };

/// Their config.json model_type.
inline constexpr std::array<enum_name<architecture>, 5> architecture_names{{
    {architecture::llama, "llama"},
    {architecture::mistral, "mistral"},
    {architecture::qwen2, "qwen2"},
    {architecture::qwen3, "qwen3"},
    {architecture::gpt2, "gpt2"},
}};

inline bool llama_style(architecture arch) {
  return arch != architecture::gpt2;
}

/// How rotary frequencies are rescaled for long contexts (HF's rope_scaling, or a GGUF
/// file's rope_freqs tensor). Only schemes whose angles depend on the position alone
/// are here: a scheme that depends on the sequence's length ("dynamic") would change
/// the KV of a prefix as the sequence grows, which a KV cache cannot honour.
struct rope_scaling {
  enum class kind { none, linear, llama3, per_frequency };
  kind type = kind::none;
  double factor = 1.0;               // linear, llama3: long wavelengths slowed by this
  double low_freq_factor = 1.0;      // llama3
  double high_freq_factor = 4.0;     // llama3
  std::int64_t original_context = 0; // llama3: original_max_position_embeddings
  // per_frequency: inverse frequency i divided by factor i, [head_dim / 2] (llama.cpp's
  // freq_factors: its converter writes Llama 3.1's llama3 scaling so).
  std::vector<double> frequency_factors;
};

/// How q/k rows are ordered inside each head for rotary embeddings.
/// HF checkpoints use rotate_half (pairs (j, j+hd/2)); llama2.c files use interleaved
/// pairs (2j, 2j+1). The models convert interleaved rows to rotate_half at load time,
/// so both give the same answers.
enum class rope_pairs { rotate_half, interleaved };

struct model_config {
  architecture arch = architecture::llama;
  std::int64_t hidden_size = 0;       // D
  std::int64_t intermediate_size = 0; // F (MLP inner width)
  std::int64_t num_layers = 0;        // L
  std::int64_t num_heads = 0;         // H (query heads)
  std::int64_t num_kv_heads = 0;      // KV heads (llama GQA; == H for gpt2)
  std::int64_t head_dim = 0;          // hd (D / H unless the config says otherwise)
  std::int64_t vocab_size = 0;        // V: rows of the embedding and the output head
  std::int64_t context_length =
      0; // longest sequence (max_position_embeddings / n_positions / seq_len)
  double norm_eps = 1e-5;      // RMSNorm (llama) or LayerNorm (gpt2) epsilon
  double rope_theta = 10000.0; // llama-style only
  rope_pairs rope = rope_pairs::rotate_half; // llama-style only
  bool tied_embeddings = true;               // output head shares the token embedding
  rope_scaling scaling;                      // llama-style only
  bool qkv_bias = false;                     // biases on q/k/v projections (Qwen2)
  bool qk_norm = false;            // RMSNorm of each head of q and k before RoPE (Qwen3)
  std::int64_t sliding_window = 0; // W > 0: a token attends to itself and the W-1
                                   // tokens before it (Mistral); 0: the whole prefix
  std::int64_t bos_token_id = -1;  // -1: none known
  std::int64_t eos_token_id = -1;  // -1: none known
};

/// The config.json model_type of `arch`.
inline std::string to_string(architecture arch) {
  return std::string(name_of(architecture_names, arch));
}

} // namespace canopy::backends
