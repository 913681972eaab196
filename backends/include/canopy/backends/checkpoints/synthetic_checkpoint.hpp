#pragma once
// Seeded synthetic checkpoints: random weights of a given shape for tests, benchmarks,
// `canopy make-model` and the engine's built-in default model, so no download is
// needed. The stream is portable and counter-based: element i of tensor `name` is a
// pure function of (seed, name, i) built from splitmix64 and Box-Muller in double
// (not std::normal_distribution, whose output differs between standard libraries), so
// the same spec gives the same bytes everywhere, and growing a model (more layers)
// leaves the tensors it already had unchanged.
// Scales (s = sqrt(64 / hidden), so hidden 64 matches the gpt2-synthetic fixture):
//   embeddings std 0.05 (gpt2 positions 0.03); norm gains 1 + N(0, 0.1); biases std 0.05;
//   q/k/v, c_attn, gate/up, c_fc std 0.2 s; o_proj, down_proj, c_proj std 0.1 s;
//   final norm gain 10 s (1 + N(0, 0.1)), gpt2 ln_f bias std 0.5.
// The large final gain sets the logit scale (std ~ 10 s * 0.05 * sqrt(hidden) = 4 for
// any hidden), so next-token distributions are clearly non-uniform, as a real model's
// are, and tests can tell a wrong answer from a right one.
// Embeddings are tied; RoPE is rotate_half; bos/eos are 1/2 (llama, when vocab > 2)
// or vocab-1 (gpt2, like GPT-2's 50256).
// Thread contract: pure functions.

#include <canopy/backends/checkpoints/checkpoint.hpp>
#include <canopy/backends/checkpoints/model_config.hpp>

#include <cstdint>
#include <string_view>

namespace canopy::backends {

struct synthetic_spec {
  architecture arch = architecture::llama;
  std::int64_t hidden = 64;      // D
  std::int64_t layers = 2;       // L
  std::int64_t heads = 4;        // H; head_dim = hidden / heads
  std::int64_t kv_heads = 0;     // 0: = heads (gpt2: must be 0 or heads)
  std::int64_t intermediate = 0; // F; 0: default_intermediate_size(arch, hidden)
  std::int64_t vocab = 512;      // V
  std::int64_t context = 128;    // longest sequence (gpt2: rows of wpe)
  std::uint64_t seed = 1;
};

/// llama: llama2.c's rule, floor(8 * hidden / 3) rounded up to a multiple of 32
/// (hidden 64 -> 192, 288 -> 768, 4096 -> 10944); gpt2: 4 * hidden.
std::int64_t default_intermediate_size(architecture arch, std::int64_t hidden);

/// Element `index` of the standard-normal stream `stream` under `seed`.
double synthetic_normal(std::uint64_t seed, std::string_view stream, std::uint64_t index);

/// The config make_synthetic_checkpoint(spec) has, without making its weights.
/// Throws as make_synthetic_checkpoint does for a spec that describes no model.
model_config synthetic_config(const synthetic_spec& spec);

/// Float32 weights in owned storage, tied embeddings. Throws std::invalid_argument
/// naming the field when the spec cannot describe a model (non-positive sizes, hidden
/// not divisible by heads, heads not divisible by kv_heads, an odd llama head_dim,
/// gpt2 with grouped kv heads, more than 2^31 parameters).
checkpoint make_synthetic_checkpoint(const synthetic_spec& spec);

} // namespace canopy::backends
