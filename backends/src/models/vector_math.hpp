#pragma once
// Float math for the direct CPU forward's loops, written so that GCC compiles a loop
// over arrays of them to SIMD code (a file using them builds with -fno-trapping-math,
// which lets it turn compare-and-select and float-to-int steps into vector code):
//  - exp_nonpositive: std::exp is a libm call per element, ~2 ns, a fifth of a
//    decoding pass's attention on stories260K. Cody-Waite reduction to r in
//    [-ln2/2, ln2/2], Cephes' degree-6 polynomial for exp(r), and 2^n put in the
//    float's exponent bits: within 2 ulp of exp over [-87, 0]; below -87 it returns
//    exp(-87) ~ 1.6e-38, which no sum of probabilities can tell from 0.
//  - silu, through exp_nonpositive of -|x|, so nothing overflows.
//  - lane_sum and lane_max: strict float arithmetic may not reorder a running sum, so
//    a single accumulator is a chain of dependent adds; eight independent lanes are a
//    SIMD register's worth.
// Thread contract: pure functions.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace canopy::backends {

inline float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : x;
  // n = round(x / ln2); x <= 0, so truncating x / ln2 - 0.5 rounds it.
  const auto n = static_cast<std::int32_t>(x * 1.44269504088896341f - 0.5f);
  const auto nf = static_cast<float>(n);
  const float r = (x - nf * 0.693359375f) + nf * 2.12194440e-4f; // ln2 = hi - lo
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const std::int32_t bits = (n + 127) << 23; // 2^n, n in [-126, 0]
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return y * scale;
}

/// x * sigmoid(x).
inline float silu(float x) {
  const float e = exp_nonpositive(-std::fabs(x)); // e^-|x|, in (0, 1]
  const float sigmoid = x >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
  return x * sigmoid;
}

constexpr std::int64_t lanes = 8;

/// Sum of x[0..n) in eight float lanes, the lanes then added in double.
inline double lane_sum(const float* x, std::int64_t n) {
  float part[lanes] = {};
  std::int64_t l = 0;
  for (; l + lanes <= n; l += lanes)
    for (std::int64_t i = 0; i < lanes; ++i)
      part[i] += x[l + i];
  double sum = 0;
  for (; l < n; ++l)
    sum += x[l];
  for (std::int64_t i = 0; i < lanes; ++i)
    sum += part[i];
  return sum;
}

/// max of x[0..n), n >= 1, in eight lanes.
inline float lane_max(const float* x, std::int64_t n) {
  float part[lanes];
  std::fill(part, part + lanes, x[0]);
  std::int64_t l = 0;
  for (; l + lanes <= n; l += lanes)
    for (std::int64_t i = 0; i < lanes; ++i)
      part[i] = x[l + i] > part[i] ? x[l + i] : part[i];
  float top = x[0];
  for (; l < n; ++l)
    top = x[l] > top ? x[l] : top;
  for (std::int64_t i = 0; i < lanes; ++i)
    top = part[i] > top ? part[i] : top;
  return top;
}

} // namespace canopy::backends
