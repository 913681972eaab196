#pragma once
// What the AVX2 kernels of this library share: the target attribute that compiles one
// function for AVX2, FMA and F16C inside a file built for the baseline x86-64 (callers
// choose at run time: block_kernels_here), and the sum of a register's lanes.
// Thread contract: pure functions.

#include <immintrin.h>

#define CANOPY_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace canopy::backends {

/// The sum of v's eight lanes: halves, then pairs, then the last two.
CANOPY_AVX2 inline float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

} // namespace canopy::backends
