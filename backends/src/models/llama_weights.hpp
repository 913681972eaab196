#pragma once
// The weights of a Llama-family model as its forwards read them: llama_model's ATen
// forward and, for float32 on the CPU, direct_llama_forward. Matrices are dense or in
// blocks (projection.hpp); norms and biases are always dense.
// Thread contract: immutable after llama_model's constructor; read from any thread.

#include "models/projection.hpp"

#include <ATen/ATen.h>

#include <vector>

namespace canopy::backends {

// Projections are stored transposed, [in, out], so a pass multiplies x W without
// BLAS transposing W (Note [weights in, out] in torch_weights.hpp).
struct llama_layer {
  at::Tensor input_norm; // [D]
  projection qkv;        // [D, (H + 2 KV) hd]: q, k, v projections fused
  at::Tensor qkv_bias;   // [(H + 2 KV) hd], or undefined (no biases)
  at::Tensor q_norm;     // [hd], or undefined (no q/k norms)
  at::Tensor k_norm;     // [hd]
  projection out;        // [H hd, D]
  at::Tensor post_norm;  // [D]
  projection gate_up;    // [D, 2F]: gate and up fused
  projection down;       // [F, D]
  at::Tensor qk_norm;    // [H + KV, hd]: q_norm for each query head, then k_norm for
                         // each KV head, so that the ATen forward norms q and k at once
};

struct llama_weights {
  token_embedding embed; // [V, D]
  projection head;       // [D, V] (dense: a transposed copy of the embedding when tied;
                         // blocks: the embedding's own when tied)
  at::Tensor norm;       // [D]
  std::vector<llama_layer> layers;
  /// Memory the weights take.
  std::size_t bytes() const;
};

} // namespace canopy::backends
