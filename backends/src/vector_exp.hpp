#pragma once
// exp(x) for x <= 0 in float, written so that a loop over an array of them compiles to
// SIMD code (std::exp is a libm call per element: ~2 ns, which was a fifth of a
// decoding pass's attention on stories260K). Cody-Waite reduction to r in
// [-ln2/2, ln2/2], Cephes' degree-6 polynomial for exp(r), and 2^n put in the float's
// exponent bits: within 2 ulp of exp over [-87, 0]; below -87 it returns exp(-87)
// ~ 1.6e-38, which no sum of probabilities can tell from 0.
// Thread contract: a pure function.

#include <algorithm>
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

} // namespace canopy::backends
