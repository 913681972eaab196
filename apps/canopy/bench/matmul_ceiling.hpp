#pragma once
// The machine's plain matmul speed, measured in the same process as a bench run: the
// ceiling a model's forward passes are compared to (they are mostly matrix products,
// so a pass cannot beat it by much).
// Thread contract: call from one thread; it uses LibTorch's (and the BLAS's) threads
// as configured for the process.

#include <cstdint>

namespace canopy::app {

/// GFLOP/s of float32 [n, n] x [n, n] products on the CPU, run for about `seconds`.
double measure_matmul_gflops(std::int64_t n = 1024, double seconds = 0.5);

} // namespace canopy::app
