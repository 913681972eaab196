#pragma once
// A weight matrix of the Llama forwards, dense or in blocks, and the two ways they use
// it: multiplied (projections, the LM head) and read by row (token embeddings).
//  - dense: the compute dtype on the model's device, [in, out] for a projection
//    (Note [weights in, out] in torch_weights.hpp) and [V, D] for embeddings;
//  - blocks (weight_dtype int8 or int4, CPU and float32 only): [out, in] quantized
//    rows (weight_blocks.hpp), multiplied by block_product.hpp, read by dequantizing
//    one row; never expanded into a float copy. With tied embeddings the head and the
//    embeddings share one block_matrix.
// Thread contract: immutable after construction; read from any thread.

#include "models/weight_blocks.hpp"

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

namespace canopy::backends {

struct projection {
  at::Tensor dense;                           // [in, out], or undefined
  std::shared_ptr<const block_matrix> blocks; // [out, in] when dense is undefined

  std::int64_t inputs() const { return blocks ? blocks->inputs() : dense.size(0); }
  std::int64_t outputs() const { return blocks ? blocks->rows() : dense.size(1); }
  std::size_t bytes() const;
};

/// The projection of `weight` [out, in] (a float32 CPU tensor when `format` is set):
/// quantized into `format`, or a dense [in, out] copy.
projection make_projection(const at::Tensor& weight, std::optional<block_format> format);

/// x [rows, in] P: [rows, out] (the ATen forward; blocks need float32 CPU x).
at::Tensor project(const at::Tensor& x, const projection& p);

/// y[rows, out] = x[rows, in] P, or y += x P when `accumulate` (the direct forward:
/// float32 buffers).
void project_into(const float* x, std::int64_t rows, const projection& p, float* y,
                  bool accumulate);

struct token_embedding {
  at::Tensor dense;                           // [V, D], or undefined
  std::shared_ptr<const block_matrix> blocks; // [V, D] when dense is undefined

  /// [T, D] rows of `tokens` [T] (int64 on the model's device).
  at::Tensor lookup(const at::Tensor& tokens) const;
  /// out[D] = the row of `token` (float32 weights: dense on the CPU, or blocks).
  void row_into(std::int64_t token, float* out) const;
  std::size_t bytes() const;
};

} // namespace canopy::backends
