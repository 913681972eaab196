#pragma once
// Checkpoint tensors as LibTorch tensors, and the small numerical pieces the models
// share.
// Thread contract: pure functions.

#include <canopy/backends/checkpoint.hpp>

#include <ATen/ATen.h>

#include <string>

namespace canopy::backends {

/// A copy of the checkpoint tensor `name` in `dtype` on `device` (the checkpoint's
/// bytes may be unaligned memory-mapped file contents, so they are never aliased).
at::Tensor load_weight(const checkpoint& ckpt, const std::string& name, at::ScalarType dtype,
                       at::Device device);

/// Log-probabilities in float32 of the logits [R, V], whatever their dtype.
at::Tensor log_probs(const at::Tensor& logits);

} // namespace canopy::backends
