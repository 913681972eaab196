#pragma once
// The matrix product of the direct CPU forward: activations times an [in, out]
// weight, float32, row-major, straight into CBLAS (OpenBLAS on Debian) with no
// tensor around it, or, on an AVX-512 CPU, into Canopy's own kernels
// (float_product.hpp).
// Thread contract: a pure function; OpenBLAS may split one call over its own pool, the
// kernel over ATen's intra-op threads.

#include <cstdint>

namespace canopy::backends {

/// Activation rows up to which a product goes row by row through sgemv rather than
/// one sgemm (Note [gemv for few rows] in blas_product.cpp).
constexpr std::int64_t max_rows_by_gemv = 2;

/// y[rows, out] = x[rows, in] w[in, out], or y += x w when `accumulate` (a residual
/// added in the same pass over y); w's rows `stride` floats apart (>= out).
void multiply_in_out(const float* x, std::int64_t rows, const float* w, std::int64_t in,
                     std::int64_t out, std::int64_t stride, float* y, bool accumulate);

} // namespace canopy::backends
