#pragma once
// The weights of a Llama-family model as its forwards read them: llama_model's ATen
// forward and, for float32 on the CPU, direct_llama_forward.
// Thread contract: immutable after llama_model's constructor; read from any thread.

#include <ATen/ATen.h>

#include <vector>

namespace canopy::backends {

// Projections are stored transposed, [in, out], so a pass multiplies x W without
// BLAS transposing W (Note [weights in, out] in torch_weights.hpp).
struct llama_layer {
  at::Tensor input_norm; // [D]
  at::Tensor qkv;        // [D, (H + 2 KV) hd]: q, k, v projections fused
  at::Tensor qkv_bias;   // [(H + 2 KV) hd], or undefined (no biases)
  at::Tensor q_norm;     // [hd], or undefined (no q/k norms)
  at::Tensor k_norm;     // [hd]
  at::Tensor out;        // [H hd, D]
  at::Tensor post_norm;  // [D]
  at::Tensor gate_up;    // [D, 2F]: gate and up fused
  at::Tensor down;       // [F, D]
};

struct llama_weights {
  at::Tensor embed; // [V, D]
  at::Tensor head;  // [D, V] (a transposed copy of the embedding when tied)
  at::Tensor norm;  // [D]
  std::vector<llama_layer> layers;
};

} // namespace canopy::backends
