#include "models/torch_weights.hpp"

#include <algorithm>
#include <cstring>

namespace canopy::backends {

namespace {

at::ScalarType scalar_type(weight_dtype dtype) {
  switch (dtype) {
  case weight_dtype::f16:
    return at::kHalf;
  case weight_dtype::bf16:
    return at::kBFloat16;
  case weight_dtype::f32:
    break;
  }
  return at::kFloat;
}

} // namespace

at::Tensor load_weight(const checkpoint& ckpt, const std::string& name,
                       at::ScalarType dtype, at::Device device) {
  const auto found = ckpt.tensors.find(name);
  if (found == ckpt.tensors.end())
    throw checkpoint_error(ckpt.source + ": missing tensor '" + name + "'");
  const auto& view = found->second;
  auto host = at::empty(view.shape, at::TensorOptions().dtype(scalar_type(view.dtype)));
  std::memcpy(host.data_ptr(), view.data, host.numel() * element_size(view.dtype));
  // A NaN or infinite weight makes every answer NaN (null in JSON) with no error: refused
  // here, by name, while the bytes are in cache anyway.
  if (!at::isfinite(host).all().item<bool>())
    throw checkpoint_error(
        ckpt.source + ": tensor '" + name +
        "' holds NaN or infinite values; its every answer would be NaN");
  return host.to(device, dtype);
}

at::Tensor in_out(const at::Tensor& weight) {
  return weight.t().contiguous();
}

at::Tensor log_probs(const at::Tensor& logits) {
  return at::log_softmax(logits, -1, at::kFloat);
}

} // namespace canopy::backends
