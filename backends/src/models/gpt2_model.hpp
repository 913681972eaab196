#pragma once
// GPT-2: LayerNorm, learned absolute positions, Conv1D projections stored [in, out]
// (y = x W + b), tanh-approximation GELU ("gelu_new"), tied head.
// Thread contract: see transformer.

#include "models/transformer.hpp"

#include <vector>

namespace canopy::backends {

class gpt2_model final : public transformer {
public:
  gpt2_model(const checkpoint& ckpt, at::ScalarType dtype, at::Device device);
  const model_config& config() const override { return config_; }
  std::size_t weight_bytes() const override;
  std::size_t lookup_table_bytes() const override;
  at::Tensor forward(const at::Tensor& tokens, const device_layout& layout,
                     const pass_kv& kv, const at::Tensor& rows,
                     const lora_spans& adapters) const override;
  /// Learned position embeddings for the whole context, made at load: they never move.
  std::int64_t prepare_positions(std::int64_t end) const override;

private:
  struct norm {
    at::Tensor weight, bias; // [D]
  };
  struct layer {
    norm ln_1;
    at::Tensor attn_w, attn_b; // [D, 3D], [3D]: q | k | v
    at::Tensor proj_w, proj_b; // [D, D], [D]
    norm ln_2;
    at::Tensor fc_w, fc_b;   // [D, F], [F]
    at::Tensor out_w, out_b; // [F, D], [D]
  };
  at::Tensor layer_norm(const at::Tensor& x, const norm& n) const;

  model_config config_;
  at::Tensor wte_;  // [V, D]
  at::Tensor head_; // [D, V]: wte transposed (Note [weights in, out])
  at::Tensor wpe_;  // [context, D]
  norm ln_f_;
  std::vector<layer> layers_;
};

} // namespace canopy::backends
