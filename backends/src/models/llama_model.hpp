#pragma once
// The Llama family: RMSNorm, rotary embeddings (rotate_half form; llama2.c's
// interleaved q/k rows are permuted into it at load; linear or llama3 frequency
// scaling), grouped-query attention, SwiGLU MLP, tied or untied head; with Qwen2's
// q/k/v biases and Qwen3's per-head q/k RMSNorm when the config has them. Mistral's
// sliding window is the attention layout's (pass_layout.hpp), not the model's.
// Thread contract: see transformer.

#include "models/llama_weights.hpp"
#include "models/rope_table.hpp"
#include "models/transformer.hpp"
#include "models/weight_format.hpp"

#include <optional>

namespace canopy::backends {

/// RoPE's inverse frequencies [hd/2] in float64, rescaled as the config's rope_scaling
/// says.
at::Tensor rope_inverse_frequencies(const model_config& config);

class llama_model final : public transformer {
public:
  /// `format`: the format of the matrices (weight_format.hpp; float32 on the CPU only:
  /// int4 keeps the embeddings and head in int8), or nullopt for dense in `dtype`.
  llama_model(const checkpoint& ckpt, at::ScalarType dtype, at::Device device,
              std::optional<weight_format> format);
  const model_config& config() const override { return config_; }
  std::size_t weight_bytes() const override { return w_.bytes(); }
  std::size_t lookup_table_bytes() const override {
    return w_.embed.shares(w_.head) ? 0 : w_.embed.bytes();
  }
  at::Tensor forward(const at::Tensor& tokens, const device_layout& layout,
                     const pass_kv& kv, const at::Tensor& rows,
                     const lora_spans& adapters) const override;
  /// Covers positions [0, end) in RoPE's tables; returns how far they reach, which
  /// changes exactly when they are rebuilt.
  std::int64_t prepare_positions(std::int64_t end) const override;
  const llama_weights& weights() const { return w_; }
  /// RoPE's tables, covering every position of `positions` (grown on demand: Note in
  /// rope_table.hpp); valid until the next call. The worker's thread only.
  const rope_table& rope_for(const std::vector<std::int64_t>& positions) const;

private:
  at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight) const;
  at::Tensor rotate(const at::Tensor& x, const at::Tensor& cos,
                    const at::Tensor& sin) const;

  model_config config_;
  llama_weights w_;
  mutable rope_table rope_; // grows in const passes, one thread (the worker's)
};

} // namespace canopy::backends
