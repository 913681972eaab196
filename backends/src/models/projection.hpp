#pragma once
// A weight matrix of the Llama forwards, dense, in bfloat16 or in blocks, and the two
// ways they use it: multiplied (projections, the LM head) and read by row (token
// embeddings). Exactly one form is set:
//  - dense: the compute dtype on the model's device, [in, out] for a projection
//    (Note [weights in, out] in torch_weights.hpp; its rows contiguous, maybe padded:
//    Note [padded rows]) and [V, D] for embeddings;
//  - bfloat16 (weight_dtype bfloat16, CPU and float32 compute only): [out, in] rows,
//    multiplied by bfloat16_product.hpp a panel at a time, read by widening one row;
//  - blocks (weight_dtype int8 or int4, the same): [out, in] quantized rows
//    (weight_blocks.hpp), multiplied by block_product.hpp, read by dequantizing one
//    row; never expanded into a float copy.
// With tied embeddings the head and the embeddings share one bfloat16 or block matrix.
// Thread contract: immutable after construction; read from any thread.

#include "models/weight_format.hpp"

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

namespace canopy::backends {

struct projection {
  at::Tensor dense;    // [in, out] (rows maybe padded), or undefined
  at::Tensor bfloat16; // [out, in], or undefined
  std::shared_ptr<const block_matrix> blocks; // [out, in], or null

  std::int64_t inputs() const;
  std::int64_t outputs() const;
  std::size_t bytes() const;
};

/// The projection of `weight` [out, in] (a float32 CPU tensor when `format` is set):
/// rounded or quantized into `format`, or a dense [in, out] copy.
projection make_projection(const at::Tensor& weight, std::optional<weight_format> format);

/// x [rows, in] P: [rows, out] (the ATen forward; blocks need float32 CPU x).
at::Tensor project(const at::Tensor& x, const projection& p);

/// y += x P in place, y [rows, out] contiguous (a residual stream): dense, one product
/// that adds as it writes (BLAS's beta = 1), not a product and an addition.
void add_projection(const at::Tensor& x, const projection& p, at::Tensor& y);

/// y[rows, out] = x[rows, in] P, or y += x P when `accumulate` (the direct forward:
/// float32 buffers).
void project_into(const float* x, std::int64_t rows, const projection& p, float* y,
                  bool accumulate);

struct token_embedding {
  at::Tensor dense;                           // [V, D], or undefined
  at::Tensor bfloat16;                        // [V, D], or undefined
  std::shared_ptr<const block_matrix> blocks; // [V, D], or null

  /// The table of a bfloat16 or block projection [V, D]: its matrix, shared.
  static token_embedding rows_of(const projection& table);
  /// [T, D] rows of `tokens` [T] (int64 on the model's device).
  at::Tensor lookup(const at::Tensor& tokens) const;
  /// out[D] = the row of `token` (float32 weights: dense on the CPU, bfloat16 or
  /// blocks).
  void row_into(std::int64_t token, float* out) const;
  /// Whether the table is `head`'s own matrix (tied embeddings), counted once.
  bool shares(const projection& head) const;
  std::size_t bytes() const;
};

} // namespace canopy::backends
