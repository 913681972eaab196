#include "models/blas_product.hpp"

#include "models/float_product.hpp"

#include <cblas.h>

namespace canopy::backends {

// Note [gemv for few rows]
// OpenBLAS 0.3.21's sgemm packs the whole weight for every call, however few rows x
// has; sgemv streams it once. One thread, a 768 x 32000 weight: one row 11.5 ms by
// sgemm against 3.8 by sgemv, two rows 11.7 against 7.6, four 12.3 against 14.9
// (768 x 2304: 587 against 240 us for one row). So up to max_rows_by_gemv rows go row
// by row through sgemv, more through one sgemm. Where the CPU has AVX-512, every
// product takes Canopy's own kernels instead (float_product.hpp).

void multiply_in_out(const float* x, std::int64_t rows, const float* w, std::int64_t in,
                     std::int64_t out, std::int64_t stride, float* y, bool accumulate) {
  const float beta = accumulate ? 1.0f : 0.0f;
  const auto m = static_cast<int>(rows), k = static_cast<int>(in),
             n = static_cast<int>(out), ld = static_cast<int>(stride);
  if (const auto kernel = float_product_here()) {
    multiply_avx512(kernel, x, rows, w, in, out, stride, y, accumulate);
    return;
  }
  if (rows > max_rows_by_gemv) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, x, k, w, ld,
                beta, y, n);
    return;
  }
  for (int r = 0; r < m; ++r)
    cblas_sgemv(CblasRowMajor, CblasTrans, k, n, 1.0f, w, ld,
                x + static_cast<std::int64_t>(r) * k, 1, beta,
                y + static_cast<std::int64_t>(r) * n, 1);
}

} // namespace canopy::backends
