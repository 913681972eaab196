#pragma once
// Loading a GGUF model (llama.cpp's and ollama's files) of an architecture Canopy
// serves: general.architecture "llama", "qwen2" or "qwen3" (llama.cpp writes Mistral's
// dense models as "llama").
//  - Config from the architecture's keys: <arch>.embedding_length, .feed_forward_length,
//    .block_count, .attention.head_count(_kv), .attention.key_length (head_dim, default
//    D / H), .context_length, .attention.layer_norm_rms_epsilon, .rope.freq_base,
//    .rope.scaling.{type,factor} (none or linear), .vocab_size (default: the embedding's
//    rows); bos/eos from tokenizer.ggml.{bos,eos}_token_id. A rope_freqs tensor (one
//    F32 factor per rotated pair: Llama 3.1's and 3.2's llama3 scaling as llama.cpp's
//    converter writes it) divides each frequency by its factor. A partial rotary
//    dimension, other rope scalings, and rope_freqs beside a linear scaling are refused
//    by name.
//  - Tensors under the canonical HF names (token_embd -> model.embed_tokens,
//    blk.N.attn_q -> model.layers.N.self_attn.q_proj, ffn_gate -> mlp.gate_proj,
//    output -> lm_head, ...), viewed in place in the mapped file. Types F32, F16, BF16,
//    Q8_0 and Q4_0 (block records: checkpoint.hpp); any other is refused, naming the
//    tensor and its type. No output tensor means tied embeddings.
//  - llama.cpp's converter stores a "llama" model's q/k rows in interleaved RoPE order
//    (config.rope = interleaved; the models permute); qwen2/qwen3 keep rotate_half.
// Thread contract: a pure function of the file system.

#include <canopy/backends/checkpoints/checkpoint.hpp>

#include <filesystem>

namespace canopy::backends {

class gguf_file;

/// Throws checkpoint_error naming the file (and the key or tensor) on any problem.
checkpoint load_gguf_checkpoint(const std::filesystem::path& path);

/// The config of a GGUF file from its header (the weights are not read).
model_config load_gguf_config(const std::filesystem::path& path);

/// The config an opened GGUF file describes (shared by the two above).
model_config gguf_model_config(const gguf_file& file);

} // namespace canopy::backends
