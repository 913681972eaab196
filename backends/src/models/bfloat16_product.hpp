#pragma once
// The matrix product of the forwards with bfloat16 weights (weight_format.hpp), rows
// [out, in] stored as bfloat16; the arithmetic is float32's on the rounded weights.
// One or two activation rows (decoding) take AVX2 kernels that widen each weight in a
// register on its way into an FMA: half float32's bytes read, nothing written (Note
// [bfloat16 decoding]). More rows, or a CPU without AVX2, take float32 BLAS one panel
// of rows at a time, each panel widened (exactly: a shift) into this thread's scratch
// just before its product.
// Thread contract: callable from several threads at once (each has its own scratch);
// one call may split its outputs over ATen's intra-op threads.

#include <ATen/ATen.h>

#include <cstdint>

namespace canopy::backends {

/// Rows a panel of `inputs`-wide rows takes: 128 KB of float32, within a core's L2.
std::int64_t bfloat16_panel_rows(std::int64_t inputs);

/// y[rows, w.size(0)] = x[rows, w.size(1)] W^T, or y += x W^T when `accumulate`; `w` a
/// contiguous bfloat16 CPU tensor [out, in].
void multiply_bfloat16(const float* x, std::int64_t rows, const at::Tensor& w, float* y,
                       bool accumulate);

/// multiply_bfloat16 through BLAS panels whatever the rows and the CPU (what it takes
/// for more than two rows, and without AVX2).
void multiply_bfloat16_panels(const float* x, std::int64_t rows, const at::Tensor& w,
                              float* y, bool accumulate);

/// "avx2" where decoding products take the AVX2 kernels (where the block kernels take
/// AVX2 or AVX-512: block_kernels_here), "portable" where they take BLAS.
const char* bfloat16_kernels_here();

/// The bits of row `row` of `w`, a contiguous bfloat16 CPU tensor [out, in].
const std::uint16_t* bfloat16_bits(const at::Tensor& w, std::int64_t row = 0);

/// out[count] = the bfloat16 values `bits` widened into float32 (exact).
void widen_bfloat16(const std::uint16_t* bits, std::int64_t count, float* out);

} // namespace canopy::backends
