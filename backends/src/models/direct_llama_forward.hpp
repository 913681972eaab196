#pragma once
// The Llama family's forward for float32 on the CPU without LibTorch's per-op
// dispatch: CBLAS products (or block products, for int8 and int4 weights:
// projection.hpp) and plain loops on buffers kept from pass to pass, new KV
// written straight into the worker's storage in its format (kv_storage). The same
// arithmetic as llama_model's ATen forward (RMSNorm, RoPE from the model's own
// float64-made tables, SwiGLU, the same attention kernels, log-softmax); sums of squares
// accumulate in double, sums of exponentials in float lanes added in double
// (vector_math.hpp).
//
// Why: a one-token pass on stories260K ran about 150 small ATen ops in ~200 us, so the
// dispatch, not the arithmetic, was the pass (Note [direct forward] in the .cpp).
//
// Used for pooled passes (every new token has a storage row: Note [key sources]);
// a pass that packs its keys takes llama_model::forward.
//
// Thread contract: one thread at a time (its worker's); forward() reuses the
// object's buffers, and the returned rows live until the next call.

#include "kv/pass_kv.hpp"
#include "models/llama_model.hpp"
#include "models/lora_weights.hpp"
#include "models/ragged_attention.hpp"

#include <canopy/backends/pass_profile.hpp>

#include <cstdint>
#include <vector>

namespace canopy::backends {

class direct_llama_forward {
public:
  /// `model` must outlive this object (its weights are read in place) and hold
  /// contiguous float32 CPU weights (or blocks); throws std::invalid_argument otherwise.
  explicit direct_llama_forward(const llama_model& model);

  /// tokens: [T] packed new tokens; slots: [T] the storage row each one's KV goes to
  /// (the layout's keys point into the storage); rows: [R] packed rows whose
  /// next-token log-probs are wanted; `adapters`: the spans of tokens computed under a
  /// LoRA adapter. Returns [R, V] natural-log probabilities. `clock` is lapped after
  /// each part.
  const float* forward(const std::vector<std::int64_t>& tokens,
                       const device_layout& layout, kv_storage& storage,
                       const std::vector<std::int64_t>& slots,
                       const std::vector<std::int64_t>& rows, const lora_spans& adapters,
                       profile_clock& clock);

private:
  void rms_norm(const float* x, const float* weight, std::int64_t rows,
                std::int64_t width, float* out) const;
  /// q, k from the fused projection of packed row t: biased, normed, rotated; q into
  /// q_, k and v stored at row `slot` of layer `layer` in the storage's format.
  void place_qkv(std::int64_t t, std::int64_t position, std::int64_t slot,
                 std::int64_t layer, kv_storage& storage);

  // The weights' memory, checked and found once (a layer's optional tensors: null).
  struct layer_weights {
    const float *input_norm, *qkv_bias, *q_norm, *k_norm, *post_norm;
    const projection *qkv, *out, *gate_up, *down;
  };
  const llama_model& model_;
  const model_config& c_;
  const token_embedding& embed_;
  const projection& head_;
  const float* norm_;
  const float *cos_ = nullptr, *sin_ = nullptr; // this pass's RoPE tables (they grow)
  std::vector<layer_weights> layers_;
  // Per pass, grown to the largest pass so far ([T, width] row-major).
  std::vector<float> x_, normed_, qkv_, q_, key_, attention_, gate_up_, swiglu_, last_,
      logits_, exponentials_;
};

} // namespace canopy::backends
