#pragma once
// Checkpoint tensors as LibTorch tensors, and the small numerical pieces the models
// share.
// Thread contract: pure functions.

#include <canopy/backends/checkpoints/checkpoint.hpp>

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace canopy::backends {

/// A copy of the checkpoint tensor `name` in `dtype` on `device` (the checkpoint's
/// bytes may be unaligned memory-mapped file contents, so they are never aliased);
/// block records (Q8_0, Q4_0) come dequantized.
at::Tensor load_weight(const checkpoint& ckpt, const std::string& name,
                       at::ScalarType dtype, at::Device device);

/// The values of `view` as load_weight gives them; `what` names the tensor in messages
/// ("file: tensor 'name'").
at::Tensor tensor_from_view(const tensor_view& view, const std::string& what,
                            at::ScalarType dtype, at::Device device);

// Note [weights in, out]
// Checkpoints store projections [out, in] (y = x W^T). A pass multiplies a few dozen
// rows by each weight; OpenBLAS ran x W on a contiguous [in, out] copy faster than
// x W^T: with 46 rows, 126 against 89 GFLOP/s for a 768 x 32000 head and 89 against
// 84 for 768 x 2304 (the ceiling: 200). The copy costs the tied embedding's size once.
/// An [in, out] copy of an [out, in] weight: rows contiguous, each row_stride(t) apart
/// (on the CPU, rows of a multiple of 4 KB take 64 bytes more: Note [padded rows]).
at::Tensor in_out(const at::Tensor& weight);

/// Bytes `t` holds, a padded matrix's padding included; 0 for an undefined tensor (a
/// model's optional weight).
inline std::size_t tensor_bytes(const at::Tensor& t) {
  if (!t.defined())
    return 0;
  const bool padded = t.dim() == 2 && t.stride(1) == 1 && t.stride(0) > t.size(1);
  const auto elements = padded ? t.size(0) * t.stride(0) : t.numel();
  return static_cast<std::size_t>(elements) * t.element_size();
}

/// Log-probabilities in float32 of the logits [R, V], whatever their dtype.
at::Tensor log_probs(const at::Tensor& logits);

} // namespace canopy::backends
