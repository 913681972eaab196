#pragma once
// Loading a llama2.c checkpoint (Karpathy's legacy "version 0" export, run.c's format):
//   int32 dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len
//   (vocab_size < 0: the classifier is untied and stored last), then float32:
//   tok_embeddings [V,D], rms_att [L,D], wq [L,H*hd,D], wk [L,KV*hd,D], wv [L,KV*hd,D],
//   wo [L,D,H*hd], rms_ffn [L,D], w1 [L,F,D], w2 [L,D,F], w3 [L,F,D], rms_final [D],
//   freq_cis_real [seq_len,hd/2], freq_cis_imag [seq_len,hd/2] (unused), wcls [V,D].
// Views use the canonical llama names (w1 -> gate_proj, w3 -> up_proj, w2 -> down_proj,
// rms_att -> input_layernorm, rms_ffn -> post_attention_layernorm) and point into the
// mapped file. q/k rows stay in the file's interleaved RoPE order (config.rope =
// interleaved; the models permute). Constants run.c hard-codes: head_dim = dim /
// n_heads, eps 1e-5, theta 10000, bos 1, eos 2. The file size must be exactly what the
// header implies.
// Thread contract: a pure function of the file system.

#include <canopy/backends/checkpoints/checkpoint.hpp>

#include <filesystem>

namespace canopy::backends {

/// Throws checkpoint_error naming the file (and what is wrong) on any problem.
checkpoint load_llama2c_checkpoint(const std::filesystem::path& path);

/// The config of a llama2.c file from its header alone (no weights are read).
model_config load_llama2c_config(const std::filesystem::path& path);

} // namespace canopy::backends
