// The AVX-512 VNNI block kernels (block_dot_vnni.hpp). Compiled with AVX-512 enabled
// for the whole file, so nothing here may have external linkage but the kernels
// themselves (no header's inline functions called at run time, no library templates):
// a copy the linker kept from here would be AVX-512 code in every caller. The test
// `vnni_kernels_export_only_themselves` reads the object's symbols.
//
// Written with SIMDe's names (Debian's libsimde-dev): where the file is compiled with
// AVX-512 they are the native intrinsics; where it is compiled with AVX2 alone (the
// tests' emulated copy) SIMDe carries out each 512-bit instruction as two 256-bit ones.
#include "models/block_dot_vnni.hpp"
#include "models/block_tile_shapes.hpp"

#include <simde/x86/avx512.h>
#include <simde/x86/f16c.h>

#ifndef CANOPY_VNNI_NAMESPACE
#error "CANOPY_VNNI_NAMESPACE names the build: avx512_vnni or avx512_vnni_emulated"
#endif

namespace canopy::backends::CANOPY_VNNI_NAMESPACE {

namespace {

// Note [vnni blocks]
// The weights become unsigned bytes, as vpdpbusd takes them: an int8 weight w as w + 128
// (its sign bit flipped), an int4 one as its stored nibble q = w + 8. With c = 128 or 8,
// the sum of u x over four elements is the sum of w x plus c times the sum of x, and the
// second term is the activation's alone: made once a block for all the tile's weight
// rows, and the lane starts from minus it. Every lane then holds exactly the AVX2
// kernel's integer. Bounds: |u x| <= 255 x 127, four of them far within int32.
//
// A 512-bit register holds block b of two adjacent weight rows (their units lie side by
// side, Note [quant units]) against the activation's block in both halves, so row 2p's
// lanes are the low eight and row 2p + 1's the high eight. The row pair's d_w d_x comes
// from one permute of the group's scales times d_x, as the AVX2 kernel makes it.

/// int32 lanes to floats. SIMDe 0.7.4 has no _mm512_cvtepi32_ps; emulated, the halves
/// convert apart, which rounds each lane alike.
inline simde__m512 to_floats(simde__m512i v) {
#if defined(SIMDE_X86_AVX512F_NATIVE)
  return _mm512_cvtepi32_ps(v);
#else
  const simde__m256 low = simde_mm256_cvtepi32_ps(simde_mm512_castsi512_si256(v));
  const simde__m256 high = simde_mm256_cvtepi32_ps(simde_mm512_extracti64x4_epi64(v, 1));
  return simde_mm512_insertf32x8(simde_mm512_castps256_ps512(low), high, 1);
#endif
}

/// The AVX2 kernels' lane tree (avx2_target.hpp's horizontal_sum), so the bits agree.
inline float horizontal_sum(simde__m256 v) {
  simde__m128 s =
      simde_mm_add_ps(simde_mm256_castps256_ps128(v), simde_mm256_extractf128_ps(v, 1));
  s = simde_mm_add_ps(s, simde_mm_movehl_ps(s, s));
  s = simde_mm_add_ss(s, simde_mm_movehdup_ps(s));
  return simde_mm_cvtss_f32(s);
}

template <block_format F> constexpr std::int64_t blocks_a_unit = blocks_per_unit(F);

/// Row k's unit holding block b (unit_offset, written out: see the top of the file).
template <block_format F>
const std::uint8_t* unit_at(const weight_rows& w, std::int64_t b, int k) {
  return w.quants + (b / blocks_a_unit<F> * group_rows + k) * unit_bytes;
}

/// Block b of weight rows 2p and 2p + 1 (the second only when R has it: a lone last
/// row reads 32 bytes, and its high lanes are never used) as unsigned bytes.
template <block_format F, int R>
simde__m512i weights_as_unsigned(const weight_rows& w, std::int64_t b, int p) {
  const std::uint8_t* unit = unit_at<F>(w, b, 2 * p);
  const simde__m512i both =
      2 * p + 1 < R ? simde_mm512_loadu_si512(unit)
                    : simde_mm512_castsi256_si512(simde_mm256_loadu_si256(unit));
  if constexpr (F == block_format::q8_0)
    return simde_mm512_xor_si512(both, simde_mm512_set1_epi8(-128));
  else // Note [quant units]: even blocks in the low nibbles, odd ones in the high
    return simde_mm512_and_si512(b % 2 == 0 ? both : simde_mm512_srli_epi16(both, 4),
                                 simde_mm512_set1_epi8(15));
}

/// Adds block b of every (weight row pair p, activation row i) of the tile into
/// acc[p][i]. Inlined into the block loop, so the accumulators stay in registers.
template <block_format F, int R, int N>
[[gnu::always_inline]] inline void add_block(const weight_rows& w, const std::int8_t* xq,
                                             const float* xd, std::int64_t blocks,
                                             std::int64_t x_stride, std::int64_t b,
                                             simde__m512 (&acc)[(R + 1) / 2][N]) {
  constexpr std::int8_t c = F == block_format::q8_0 ? -128 : 8; // as unsigned: 128, 8
  const simde__m256 scales =
      simde_mm256_cvtph_ps(simde_mm_loadu_si128(w.scales + b * group_rows));
  simde__m512i x[N], start[N];
  simde__m512 scaled[N];
  for (int i = 0; i < N; ++i) {
    x[i] = simde_mm512_broadcast_i64x4(
        simde_mm256_loadu_si256(xq + i * x_stride + b * block_width));
    start[i] =
        simde_mm512_sub_epi32(simde_mm512_setzero_si512(),
                              simde_mm512_dpbusd_epi32(simde_mm512_setzero_si512(),
                                                       simde_mm512_set1_epi8(c), x[i]));
    scaled[i] = simde_mm512_castps256_ps512(
        simde_mm256_mul_ps(scales, simde_mm256_set1_ps(xd[i * blocks + b])));
  }
  for (int p = 0; p < (R + 1) / 2; ++p) {
    const simde__m512i u = weights_as_unsigned<F, R>(w, b, p);
    const simde__m512i pair = simde_mm512_set_epi32(
        2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1,
        2 * p + 1, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p);
    for (int i = 0; i < N; ++i)
      acc[p][i] = simde_mm512_fmadd_ps(
          simde_mm512_permutexvar_ps(pair, scaled[i]),
          to_floats(simde_mm512_dpbusd_epi32(start[i], u, x[i])), acc[p][i]);
  }
}

template <block_format F, int R, int N>
void dot_tile(const weight_rows& w, const std::int8_t* xq, const float* xd,
              std::int64_t blocks, std::int64_t x_stride, float* out) {
  simde__m512 acc[(R + 1) / 2][N];
  for (auto& pair : acc)
    for (auto& a : pair)
      a = simde_mm512_setzero_ps();
  // An int4 unit's two blocks in one iteration, as the AVX2 kernel does.
  constexpr auto per_unit = blocks_a_unit<F>;
  std::int64_t b = 0;
  for (; b + per_unit <= blocks; b += per_unit) {
    add_block<F, R, N>(w, xq, xd, blocks, x_stride, b, acc);
    if constexpr (per_unit == 2)
      add_block<F, R, N>(w, xq, xd, blocks, x_stride, b + 1, acc);
  }
  if (b < blocks)
    add_block<F, R, N>(w, xq, xd, blocks, x_stride, b, acc);
  for (int k = 0; k < R; ++k)
    for (int i = 0; i < N; ++i) {
      const simde__m512 a = acc[k / 2][i];
      out[k * N + i] =
          horizontal_sum(k % 2 == 0 ? simde_mm512_castps512_ps256(a)
                                    : simde_mm256_castpd_ps(simde_mm512_extractf64x4_pd(
                                          simde_mm512_castps_pd(a), 1)));
    }
}

template <block_format F>
void dot(const weight_rows& w, int r, const std::int8_t* xq, const float* xd,
         std::int64_t blocks, std::int64_t x_stride, int n, float* out) {
  dispatch_tile(r, n, [&](auto rows, auto columns) {
    dot_tile<F, decltype(rows)::value, decltype(columns)::value>(w, xq, xd, blocks,
                                                                 x_stride, out);
  });
}

} // namespace

void dot_q8_0(const weight_rows& w, int r, const std::int8_t* xq, const float* xd,
              std::int64_t blocks, std::int64_t x_stride, int n, float* out) {
  dot<block_format::q8_0>(w, r, xq, xd, blocks, x_stride, n, out);
}

void dot_q4_0(const weight_rows& w, int r, const std::int8_t* xq, const float* xd,
              std::int64_t blocks, std::int64_t x_stride, int n, float* out) {
  dot<block_format::q4_0>(w, r, xq, xd, blocks, x_stride, n, out);
}

} // namespace canopy::backends::CANOPY_VNNI_NAMESPACE
