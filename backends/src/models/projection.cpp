#include "models/projection.hpp"

#include "models/bfloat16_product.hpp"
#include "models/blas_product.hpp"
#include "models/block_product.hpp"
#include "models/torch_weights.hpp"

#include <cstring>

namespace canopy::backends {

namespace {

/// The bytes of a matrix held in one of the three forms.
std::size_t bytes_of(const at::Tensor& dense, const at::Tensor& bfloat16,
                     const block_matrix* blocks) {
  return blocks ? blocks->bytes() : tensor_bytes(bfloat16.defined() ? bfloat16 : dense);
}

} // namespace

std::int64_t projection::inputs() const {
  return blocks               ? blocks->inputs()
         : bfloat16.defined() ? bfloat16.size(1)
                              : dense.size(0);
}

std::int64_t projection::outputs() const {
  return blocks ? blocks->rows() : bfloat16.defined() ? bfloat16.size(0) : dense.size(1);
}

std::size_t projection::bytes() const {
  return bytes_of(dense, bfloat16, blocks.get());
}

token_embedding token_embedding::rows_of(const projection& table) {
  return {at::Tensor(), table.bfloat16, table.blocks};
}

bool token_embedding::shares(const projection& head) const {
  return (blocks && blocks == head.blocks) ||
         (bfloat16.defined() && bfloat16.is_same(head.bfloat16));
}

std::size_t token_embedding::bytes() const {
  return bytes_of(dense, bfloat16, blocks.get());
}

projection make_projection(const at::Tensor& weight,
                           std::optional<weight_format> format) {
  if (!format)
    return {in_out(weight), at::Tensor(), nullptr};
  if (*format == weight_format::bf16)
    return {at::Tensor(), weight.to(at::kBFloat16).contiguous(), nullptr};
  const auto rows = weight.contiguous();
  return {at::Tensor(), at::Tensor(),
          std::make_shared<const block_matrix>(
              *blocks_of(*format), rows.data_ptr<float>(), rows.size(0), rows.size(1))};
}

at::Tensor project(const at::Tensor& x, const projection& p) {
  if (p.dense.defined())
    return at::mm(x, p.dense);
  const auto in = x.contiguous();
  auto y = at::empty({in.size(0), p.outputs()}, in.options());
  project_into(in.data_ptr<float>(), in.size(0), p, y.data_ptr<float>(), false);
  return y;
}

void add_projection(const at::Tensor& x, const projection& p, at::Tensor& y) {
  if (p.dense.defined()) {
    y.addmm_(x, p.dense);
    return;
  }
  const auto in = x.contiguous();
  project_into(in.data_ptr<float>(), in.size(0), p, y.data_ptr<float>(), true);
}

void project_into(const float* x, std::int64_t rows, const projection& p, float* y,
                  bool accumulate) {
  if (p.blocks)
    multiply_blocks(x, rows, *p.blocks, y, accumulate);
  else if (p.bfloat16.defined())
    multiply_bfloat16(x, rows, p.bfloat16, y, accumulate);
  else
    multiply_in_out(x, rows, p.dense.data_ptr<float>(), p.inputs(), p.outputs(),
                    p.dense.stride(0), y, accumulate);
}

at::Tensor token_embedding::lookup(const at::Tensor& tokens) const {
  if (dense.defined())
    return dense.index_select(0, tokens);
  const auto ids = tokens.to(at::kCPU).contiguous();
  const auto width = blocks ? blocks->inputs() : bfloat16.size(1);
  auto rows = at::empty({ids.size(0), width}, at::kFloat);
  for (std::int64_t t = 0; t < ids.size(0); ++t)
    row_into(ids.data_ptr<std::int64_t>()[t], rows.data_ptr<float>() + t * width);
  return rows;
}

void token_embedding::row_into(std::int64_t token, float* out) const {
  if (blocks) {
    blocks->dequantize_row(token, out);
    return;
  }
  if (bfloat16.defined()) {
    widen_bfloat16(bfloat16_bits(bfloat16, token), bfloat16.size(1), out);
    return;
  }
  const auto width = dense.size(1);
  std::memcpy(out, dense.data_ptr<float>() + token * width,
              static_cast<std::size_t>(width) * sizeof(float));
}

} // namespace canopy::backends
