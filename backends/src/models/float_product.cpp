#include "models/float_product.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <new>
#include <string_view>

namespace canopy::backends {

namespace {

// Outputs a task takes: a multiple of the decoding blocks (128) and of the tiles' (64).
constexpr std::int64_t task_unit = 128;

/// This thread's scratch for packed weights (float_product_scratch_floats, aligned).
float* thread_scratch() {
  struct free_deleter {
    void operator()(float* p) const { std::free(p); }
  };
  thread_local const std::unique_ptr<float, free_deleter> scratch([] {
    auto* p = static_cast<float*>(
        std::aligned_alloc(64, float_product_scratch_floats * sizeof(float)));
    if (p == nullptr)
      throw std::bad_alloc();
    return p;
  }());
  return scratch.get();
}

} // namespace

float_product_fn float_product_here() {
  static const float_product_fn chosen = []() -> float_product_fn {
    const char* capability = std::getenv("ATEN_CPU_CAPABILITY");
    const std::string_view asked = capability != nullptr ? capability : "";
    if (asked == "avx2" || asked == "default")
      return nullptr;
    __builtin_cpu_init();
    // __builtin_cpu_supports also asks the OS (XGETBV) whether it saves the 512-bit
    // registers.
    return __builtin_cpu_supports("avx512f") ? avx512_float::product : nullptr;
  }();
  return chosen;
}

const char* float_product_kernels_here() {
  return float_product_here() != nullptr ? "avx512" : "blas";
}

void multiply_avx512(float_product_fn kernel, const float* x, std::int64_t rows,
                     const float* w, std::int64_t in, std::int64_t out,
                     std::int64_t stride, float* y, bool accumulate) {
  const auto units = (out + task_unit - 1) / task_unit;
  // A task of fewer than ~64k multiply-adds costs more to hand out than to run.
  const auto grain =
      std::max<std::int64_t>(1, (std::int64_t{1} << 16) / (rows * in * task_unit));
  at::parallel_for(0, units, grain, [&](std::int64_t begin, std::int64_t end) {
    kernel(x, rows, w, in, out, stride, begin * task_unit, std::min(end * task_unit, out),
           y, accumulate, thread_scratch());
  });
}

} // namespace canopy::backends
