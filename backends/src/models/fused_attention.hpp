#pragma once
// Attention through LibTorch's fused kernels, at::scaled_dot_product_attention (SDPA,
// LibTorch 2.1 and later): softmax(q k^T + mask) v without the scores ever in memory. On
// a GPU, SDPA takes its flash kernel for a causal group without a mask, and its
// memory-efficient one for an additive mask (flash refuses masks: docs/benchmarks.md,
// "Issue 32's workloads"). A prefill group's scores are items x heads x queries x keys:
// written out, they cost more memory traffic than the rest of its layer.
// Thread contract: pure functions over tensors; the worker's thread.

#include <ATen/ATen.h>

namespace canopy::backends {

/// Whether this LibTorch has the fused kernels (Debian bookworm's 1.13 has not).
bool fused_attention_available();

/// q [G, n, H, hd], already scaled by 1/sqrt(hd); k, v [G, L, KV, hd] with H a multiple
/// of KV (query head h reads KV head h / (H / KV), as HF's repeat_kv); `mask` [G, 1, n,
/// L] additive, or undefined for causal attention from the top left (n == L: query j sees
/// keys 0..j). Returns [G, n, H, hd]. With one query per item (decoding) the KV heads are
/// read as they are; with more, a grouped-query model's are copied per query head. Throws
/// std::logic_error where fused_attention_available() is false.
at::Tensor fused_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const at::Tensor& mask);

} // namespace canopy::backends
