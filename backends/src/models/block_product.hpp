#pragma once
// The matrix product of the forwards with weights in blocks (weight_blocks.hpp):
// activations quantized per block of 32 (block_dot.hpp), exact integer block products,
// nothing of the weights expanded into floats.
// Thread contract: callable from several threads at once (each has its own scratch);
// one call may split its outputs over ATen's intra-op threads.

#include "models/block_dot.hpp"
#include "models/weight_blocks.hpp"

#include <cstdint>

namespace canopy::backends {

/// y[rows, w.rows()] = x[rows, w.inputs()] W^T, or y += x W^T when `accumulate`.
void multiply_blocks(const float* x, std::int64_t rows, const block_matrix& w, float* y,
                     bool accumulate);
/// The same through `kernels` instead of block_kernels_here() (the tests' emulated
/// VNNI set).
void multiply_blocks(const float* x, std::int64_t rows, const block_matrix& w, float* y,
                     bool accumulate, const block_kernels& kernels);

} // namespace canopy::backends
