#include "models/torch_weights.hpp"

#include "models/weight_blocks.hpp"

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
  case weight_dtype::q8_0: // dequantized to float32
  case weight_dtype::q4_0:
    break;
  }
  return at::kFloat;
}

/// The float32 values of a view in block records (each d q, exactly).
at::Tensor dequantized(const tensor_view& view) {
  auto out = at::empty(view.shape, at::kFloat);
  float* values = out.data_ptr<float>();
  const auto records = out.numel() / record_values;
  for (std::int64_t r = 0; r < records; ++r) {
    const std::byte* record = view.data + r * record_bytes(view.dtype);
    const float d = from_half_bits(record_scale_bits(record));
    for (std::int64_t j = 0; j < record_values; ++j)
      values[r * record_values + j] =
          d * static_cast<float>(record_quant(view.dtype, record, j));
  }
  return out;
}

} // namespace

at::Tensor tensor_from_view(const tensor_view& view, const std::string& what,
                            at::ScalarType dtype, at::Device device) {
  at::Tensor host;
  if (is_block_dtype(view.dtype)) {
    host = dequantized(view);
  } else {
    host = at::empty(view.shape, at::TensorOptions().dtype(scalar_type(view.dtype)));
    std::memcpy(host.data_ptr(), view.data, host.numel() * element_size(view.dtype));
  }
  // A NaN or infinite weight makes every answer NaN (null in JSON) with no error: refused
  // here, by name, while the bytes are in cache anyway.
  if (!at::isfinite(host).all().item<bool>())
    throw checkpoint_error(what + " holds NaN or infinite values; its every answer would "
                                  "be NaN");
  return host.to(device, dtype);
}

at::Tensor load_weight(const checkpoint& ckpt, const std::string& name,
                       at::ScalarType dtype, at::Device device) {
  const auto found = ckpt.tensors.find(name);
  if (found == ckpt.tensors.end())
    throw checkpoint_error(ckpt.source + ": missing tensor '" + name + "'");
  return tensor_from_view(found->second, ckpt.source + ": tensor '" + name + "'", dtype,
                          device);
}

// Note [padded rows]
// A product of one row walks each 128-output block of an [in, out] weight down all its
// inputs, `out` floats apart (Note [float32 decoding]). Where that stride is a multiple
// of 4 KB (a 768 x 4096 MLP weight), every input's block falls in the same cache sets
// and the same offset of a new page: one core read it at 22-24 GB/s where a 4224-float
// stride ran at 39-41. So on the CPU such rows are stored 64 bytes longer, the padding
// never read; ATen and BLAS take the row stride as the leading dimension.
at::Tensor in_out(const at::Tensor& weight) {
  const auto in = weight.size(1), out = weight.size(0);
  const auto aliasing =
      weight.device().is_cpu() && (out * weight.element_size()) % 4096 == 0;
  if (!aliasing)
    return weight.t().contiguous();
  const auto pad = 64 / weight.element_size();
  auto rows = at::empty({in, out + pad}, weight.options()).narrow(1, 0, out);
  rows.copy_(weight.t());
  return rows;
}

at::Tensor log_probs(const at::Tensor& logits) {
  return at::log_softmax(logits, -1, at::kFloat);
}

} // namespace canopy::backends
