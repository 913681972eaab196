#include "models/float_decode.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

namespace canopy::backends {

namespace {

// Outputs a task takes: a multiple of the kernel's 16 lanes, and of its 128-output
// blocks where a task has several.
constexpr std::int64_t task_unit = 128;

} // namespace

float_decode_fn float_decode_here() {
  static const float_decode_fn chosen = []() -> float_decode_fn {
    const char* capability = std::getenv("ATEN_CPU_CAPABILITY");
    const std::string_view asked = capability != nullptr ? capability : "";
    if (asked == "avx2" || asked == "default")
      return nullptr;
    __builtin_cpu_init();
    // __builtin_cpu_supports also asks the OS (XGETBV) whether it saves the 512-bit
    // registers.
    return __builtin_cpu_supports("avx512f") ? avx512_float::decode_in_out : nullptr;
  }();
  return chosen;
}

const char* float_decode_kernels_here() {
  return float_decode_here() != nullptr ? "avx512" : "blas";
}

void decode_in_out(float_decode_fn kernel, const float* x, std::int64_t rows,
                   const float* w, std::int64_t in, std::int64_t out, std::int64_t stride,
                   float* y, bool accumulate) {
  const auto units = (out + task_unit - 1) / task_unit;
  // A task of fewer than ~64k multiply-adds costs more to hand out than to run.
  const auto grain =
      std::max<std::int64_t>(1, (std::int64_t{1} << 16) / (rows * in * task_unit));
  at::parallel_for(0, units, grain, [&](std::int64_t begin, std::int64_t end) {
    kernel(x, static_cast<int>(rows), w, in, out, stride, begin * task_unit,
           std::min(end * task_unit, out), y, accumulate);
  });
}

} // namespace canopy::backends
