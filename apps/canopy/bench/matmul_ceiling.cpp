#include "bench/matmul_ceiling.hpp"

#include <ATen/ATen.h>

#include <chrono>

namespace canopy::app {

double measure_matmul_gflops(std::int64_t n, double seconds) {
  const auto a = at::randn({n, n}, at::kFloat);
  const auto b = at::randn({n, n}, at::kFloat);
  auto c = at::mm(a, b); // warm-up: BLAS threads start, pages are touched
  using clock = std::chrono::steady_clock;
  const auto started = clock::now();
  std::int64_t runs = 0;
  double elapsed = 0;
  do {
    at::mm_out(c, a, b);
    ++runs;
    elapsed = std::chrono::duration<double>(clock::now() - started).count();
  } while (elapsed < seconds);
  return 2.0 * double(n) * double(n) * double(n) * double(runs) / elapsed * 1e-9;
}

} // namespace canopy::app
