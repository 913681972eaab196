#include "models/projection.hpp"

#include "models/blas_product.hpp"
#include "models/block_product.hpp"
#include "models/torch_weights.hpp"

#include <cstring>

namespace canopy::backends {

std::size_t projection::bytes() const {
  return blocks ? blocks->bytes() : tensor_bytes(dense);
}

std::size_t token_embedding::bytes() const {
  return blocks ? blocks->bytes() : tensor_bytes(dense);
}

projection make_projection(const at::Tensor& weight, std::optional<block_format> format) {
  if (!format)
    return {in_out(weight), nullptr};
  const auto rows = weight.contiguous();
  return {at::Tensor(), std::make_shared<const block_matrix>(
                            *format, rows.data_ptr<float>(), rows.size(0), rows.size(1))};
}

at::Tensor project(const at::Tensor& x, const projection& p) {
  if (!p.blocks)
    return at::mm(x, p.dense);
  const auto in = x.contiguous();
  auto y = at::empty({in.size(0), p.outputs()}, in.options());
  multiply_blocks(in.data_ptr<float>(), in.size(0), *p.blocks, y.data_ptr<float>(),
                  false);
  return y;
}

void project_into(const float* x, std::int64_t rows, const projection& p, float* y,
                  bool accumulate) {
  if (p.blocks)
    multiply_blocks(x, rows, *p.blocks, y, accumulate);
  else
    multiply_in_out(x, rows, p.dense.data_ptr<float>(), p.inputs(), p.outputs(), y,
                    accumulate);
}

at::Tensor token_embedding::lookup(const at::Tensor& tokens) const {
  if (!blocks)
    return dense.index_select(0, tokens);
  const auto ids = tokens.to(at::kCPU).contiguous();
  auto rows = at::empty({ids.size(0), blocks->inputs()}, at::kFloat);
  for (std::int64_t t = 0; t < ids.size(0); ++t)
    row_into(ids.data_ptr<std::int64_t>()[t],
             rows.data_ptr<float>() + t * blocks->inputs());
  return rows;
}

void token_embedding::row_into(std::int64_t token, float* out) const {
  if (blocks) {
    blocks->dequantize_row(token, out);
    return;
  }
  const auto width = dense.size(1);
  std::memcpy(out, dense.data_ptr<float>() + token * width,
              static_cast<std::size_t>(width) * sizeof(float));
}

} // namespace canopy::backends
