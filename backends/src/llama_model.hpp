#pragma once
// The Llama family: RMSNorm, rotary embeddings (rotate_half form; llama2.c's
// interleaved q/k rows are permuted into it at load; linear or llama3 frequency
// scaling), grouped-query attention, SwiGLU MLP, tied or untied head; with Qwen2's
// q/k/v biases and Qwen3's per-head q/k RMSNorm when the config has them. Mistral's
// sliding window is the attention layout's (pass_layout.hpp), not the model's.
// Thread contract: see transformer.

#include "transformer.hpp"

#include <vector>

namespace canopy::backends {

/// RoPE's inverse frequencies [hd/2] in float64, rescaled as the config's rope_scaling
/// says.
at::Tensor rope_inverse_frequencies(const model_config& config);

class llama_model final : public transformer {
public:
  llama_model(const checkpoint& ckpt, at::ScalarType dtype, at::Device device);
  const model_config& config() const override { return config_; }
  at::Tensor forward(const at::Tensor& tokens, const device_layout& layout, const pass_kv& kv,
                     const at::Tensor& rows) const override;

private:
  // Projections are stored transposed, [in, out], so a pass multiplies x W without
  // BLAS transposing W (Note [weights in, out] in torch_weights.hpp).
  struct layer {
    at::Tensor input_norm;  // [D]
    at::Tensor qkv;         // [D, (H + 2 KV) hd]: q, k, v projections fused
    at::Tensor qkv_bias;    // [(H + 2 KV) hd], or undefined (no biases)
    at::Tensor q_norm;      // [hd], or undefined (no q/k norms)
    at::Tensor k_norm;      // [hd]
    at::Tensor out;         // [H hd, D]
    at::Tensor post_norm;   // [D]
    at::Tensor gate_up;     // [D, 2F]: gate and up fused
    at::Tensor down;        // [F, D]
  };
  at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight) const;
  at::Tensor rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) const;

  model_config config_;
  at::Tensor embed_; // [V, D]
  at::Tensor head_;  // [D, V] (a transposed copy of the embedding when tied)
  at::Tensor norm_;  // [D]
  at::Tensor cos_, sin_; // [context, hd], computed in float64 then cast
  std::vector<layer> layers_;
};

} // namespace canopy::backends
