#pragma once
// The tile that every SIMD block kernel runs (block_dot.hpp, Note [exact block sums]):
// a group's eight weight rows against N activation rows (1, 2 or 4), 8N pairs, eight
// to a register. An instruction set brings only its pair products, a type `Pairs`
// with
//   template <block_format F, int Half, int N>
//   static void products(__m256i unit, const __m256i (&x)[N], __m256i* out);
// which writes out[i] = int32 lanes summing to the integer dot product of the unit's
// block (int4: the low nibbles where Half is 0, the high ones where 1) with x[i], and
//   template <block_format F> static constexpr int offset_shift;
// the log2 of c where each weight entered the products as w + c (-1: none). The tile
// subtracts c times the activation block's sum of quants, then scales and adds.
//
// Internal linkage on purpose, and no inline function of another header called: each
// kernel file compiles these for its own instruction set (block_dot.cpp under
// `#pragma GCC target("avx2,fma,f16c")`, block_dot_vnni.cpp with AVX-512 for the whole
// file), and a shared inline copy could be the one the linker keeps, compiled for a
// CPU that the program may not be running on.
// Thread contract: pure functions.

#include "models/block_dot.hpp"

#include <immintrin.h>

namespace canopy::backends {
namespace { // NOLINT(cert-dcl59-cpp,google-build-namespaces): see above

/// Lane j: the sum of v[j]'s eight int32 lanes. Exact: wrapping adds of sums that fit.
inline __m256i sums_of_eight(const __m256i* v) {
  const __m256i a =
      _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  const __m256i b =
      _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
  // a holds v0..v3's low-half sums in its low lane and their high-half sums in its
  // high lane; b the same for v4..v7.
  return _mm256_add_epi32(_mm256_blend_epi32(a, b, 0xF0),
                          _mm256_permute2x128_si256(a, b, 0x21));
}

/// N consecutive values (rows 0..N-1 of a block) repeated across the eight lanes, as a
/// tile's pairs take them: lane l holds row l % N.
template <int N> inline __m256 rows_across_lanes(const float* v) {
  if constexpr (N == 1)
    return _mm256_broadcast_ss(v);
  else if constexpr (N == 2)
    return _mm256_castpd_ps(_mm256_broadcast_sd(reinterpret_cast<const double*>(v)));
  else
    return _mm256_broadcast_ps(reinterpret_cast<const __m128*>(v));
}
template <int N> inline __m256i rows_across_lanes(const std::int32_t* v) {
  return _mm256_castps_si256(rows_across_lanes<N>(reinterpret_cast<const float*>(v)));
}

/// Row k's unit holding block b: weight_blocks.hpp's unit_offset written out, since a
/// header's inline function called here at run time could be kept as the AVX-512
/// file's copy (blocks_per_unit is evaluated at compile time only).
template <block_format F>
inline const std::uint8_t* unit_at(const weight_rows& w, std::int64_t b, int k) {
  constexpr std::int64_t blocks_a_unit = blocks_per_unit(F); // at compile time
  return w.quants + (b / blocks_a_unit * group_rows + k) * unit_bytes;
}

/// Adds block b into the tile's accumulators. Register p holds pairs 8p..8p+7, pair
/// j = k N + i (weight row k, activation row i); weight_of_lane[p] names each lane's k.
template <class Pairs, block_format F, int Half, int N>
[[gnu::always_inline]] inline void
add_group_block(const weight_rows& w, const activation_blocks& x, std::int64_t b,
                const __m256i (&weight_of_lane)[N], __m256 (&acc)[N]) {
  constexpr int weight_rows_a_register = 8 / N;
  const __m256 dw = _mm256_cvtph_ps(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales + b * group_rows)));
  const __m256 dx = rows_across_lanes<N>(x.scales + b * x.rows);
  __m256i rows[N];
  for (int i = 0; i < N; ++i)
    rows[i] = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(x.quants + i * x.stride + b * block_width));
  for (int p = 0; p < N; ++p) {
    __m256i lanes[8];
    for (int kk = 0; kk < weight_rows_a_register; ++kk) {
      const int k = p * weight_rows_a_register + kk;
      const __m256i unit =
          _mm256_load_si256(reinterpret_cast<const __m256i*>(unit_at<F>(w, b, k)));
      Pairs::template products<F, Half, N>(unit, rows, lanes + kk * N);
    }
    __m256i sums = sums_of_eight(lanes);
    if constexpr (Pairs::template offset_shift<F> >= 0)
      sums = _mm256_sub_epi32(sums,
                              _mm256_slli_epi32(rows_across_lanes<N>(x.sums + b * x.rows),
                                                Pairs::template offset_shift<F>));
    const __m256 scale =
        _mm256_mul_ps(N == 1 ? dw : _mm256_permutevar8x32_ps(dw, weight_of_lane[p]), dx);
    acc[p] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, acc[p]);
  }
}

template <class Pairs, block_format F, int N>
void group_tile(const weight_rows& w, const activation_blocks& x, float* out) {
  __m256 acc[N];
  __m256i weight_of_lane[N];
  for (int p = 0; p < N; ++p) {
    acc[p] = _mm256_setzero_ps();
    const int k = p * (8 / N);
    weight_of_lane[p] =
        N == 2   ? _mm256_setr_epi32(k, k, k + 1, k + 1, k + 2, k + 2, k + 3, k + 3)
        : N == 4 ? _mm256_setr_epi32(k, k, k, k, k + 1, k + 1, k + 1, k + 1)
                 : _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  }
  // An int4 unit's two blocks in one iteration: no test of b's parity inside.
  constexpr std::int64_t blocks_a_unit = blocks_per_unit(F);
  std::int64_t b = 0;
  for (; b + blocks_a_unit <= x.blocks; b += blocks_a_unit) {
    add_group_block<Pairs, F, 0, N>(w, x, b, weight_of_lane, acc);
    if constexpr (blocks_a_unit == 2)
      add_group_block<Pairs, F, 1, N>(w, x, b + 1, weight_of_lane, acc);
  }
  if (b < x.blocks)
    add_group_block<Pairs, F, 0, N>(w, x, b, weight_of_lane, acc);
  for (int p = 0; p < N; ++p)
    _mm256_storeu_ps(out + 8 * p, acc[p]);
}

/// The block_dot_signature kernel of `Pairs` for format F.
template <class Pairs, block_format F>
void group_dot(const weight_rows& w, const activation_blocks& x, int n, float* out) {
  switch (n) {
  case 1:
    return group_tile<Pairs, F, 1>(w, x, out);
  case 2:
    return group_tile<Pairs, F, 2>(w, x, out);
  default:
    return group_tile<Pairs, F, 4>(w, x, out);
  }
}

} // namespace
} // namespace canopy::backends
