#include "models/fused_attention.hpp"

#include <torch/version.h>

#include <stdexcept>

// SDPA came in LibTorch 2.0, its `scale` argument in 2.1: the queries arrive scaled.
#define CANOPY_HAS_SDPA                                                                  \
  (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1))

namespace canopy::backends {

bool fused_attention_available() {
  return CANOPY_HAS_SDPA;
}

#if CANOPY_HAS_SDPA

namespace {

/// [G, L, KV, hd] -> [G, H, L, hd], each KV head read by H / KV query heads in turn. A
/// copy when KV < H: SDPA's grouped-query flag takes LibTorch 2.5, and not every kernel
/// honours it.
at::Tensor as_heads(const at::Tensor& x, std::int64_t H) {
  const auto t = x.transpose(1, 2);
  const auto G = t.size(0), KV = t.size(1), L = t.size(2), hd = t.size(3);
  if (KV == H)
    return t;
  return t.unsqueeze(2).expand({G, KV, H / KV, L, hd}).reshape({G, H, L, hd});
}

} // namespace

at::Tensor fused_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const at::Tensor& mask) {
  const auto G = q.size(0), n = q.size(1), H = q.size(2), hd = q.size(3);
  const auto KV = k.size(2);
  if (n == 1 && mask.defined()) {
    // Decoding: one query per item, so the query heads that share a KV head can stand
    // in the queries' place, and keys need no copy per query head ([G, 1, 1, L] masks
    // every one alike).
    const auto out =
        at::scaled_dot_product_attention(q.view({G, KV, H / KV, hd}), k.transpose(1, 2),
                                         v.transpose(1, 2), mask, 0.0, false, 1.0);
    return out.reshape({G, 1, H, hd});
  }
  const auto qh = q.transpose(1, 2), kh = as_heads(k, H), vh = as_heads(v, H);
  const auto out =
      mask.defined() ? at::scaled_dot_product_attention(qh, kh, vh, mask, 0.0, false, 1.0)
                     : at::scaled_dot_product_attention(qh, kh, vh, {}, 0.0, true, 1.0);
  return out.transpose(1, 2);
}

#else

at::Tensor fused_attention(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                           const at::Tensor&) {
  throw std::logic_error("fused attention needs LibTorch 2.1 or later");
}

#endif

} // namespace canopy::backends
