// The AVX-512 VNNI block kernels (block_dot_vnni.hpp). Compiled with AVX-512 enabled
// for the whole file, so nothing here may have external linkage but the kernels
// themselves (no header's inline functions called at run time, no library templates):
// a copy the linker kept from here would be AVX-512 code in every caller. The test
// `vnni_kernels_export_only_themselves` reads the object's symbols.
//
// The pair products are written with SIMDe's names (Debian's libsimde-dev): where the
// file is compiled with AVX-512 they are the native instructions; where it is compiled
// with AVX2 alone (the tests' emulated copy) SIMDe carries them out with AVX2.
#include "models/block_dot_vnni.hpp"
#include "models/block_group_tile.hpp"

// SIMDe's insert.h uses setzero.h without including it: setzero.h first.
#include <simde/x86/avx512/setzero.h>

#include <simde/x86/avx512/cast.h>
#include <simde/x86/avx512/dpbusd.h>
#include <simde/x86/avx512/extract.h>
#include <simde/x86/avx512/fmadd.h>
#include <simde/x86/avx512/insert.h>
#include <simde/x86/avx512/loadu.h>
#include <simde/x86/avx512/mul.h>
#include <simde/x86/avx512/set1.h>
#include <simde/x86/avx512/storeu.h>

#include <cstring>

#ifndef CANOPY_AVX512_NAMESPACE
#error "CANOPY_AVX512_NAMESPACE names the build: avx512_vnni or avx512_vnni_emulated"
#endif

namespace canopy::backends::CANOPY_AVX512_NAMESPACE {

namespace {

// Note [vnni pairs]
// vpdpbusd takes unsigned by signed bytes and adds each lane's four products into
// int32 in one instruction, where AVX2 takes three (sign, maddubs, madd). The weights
// become unsigned bytes: an int8 weight w as w + 128 (its sign bit flipped), an int4
// one as its stored nibble q = w + 8; the tile then subtracts 128 (offset_shift 7) or
// 8 (3) times the activation block's sum. Bounds: |u x| <= 255 x 127, four of them far
// within int32. The block's integer is then exactly the AVX2 kernel's (Note [exact
// block sums]), and so are the bits.
struct vnni_pairs {
  template <block_format F>
  static constexpr int offset_shift = F == block_format::q8_0 ? 7 : 3;

  template <block_format F, int Half, int N>
  static void products(__m256i unit, const __m256i (&x)[N], __m256i* out) {
    __m256i u;
    if constexpr (F == block_format::q8_0)
      u = _mm256_xor_si256(unit, _mm256_set1_epi8(-128));
    else // Note [quant units]
      u = _mm256_and_si256(Half == 0 ? unit : _mm256_srli_epi16(unit, 4),
                           _mm256_set1_epi8(15));
    for (int i = 0; i < N; ++i)
      out[i] = simde_mm256_dpbusd_epi32(_mm256_setzero_si256(), u, x[i]);
  }
};

/// Four bytes from p as one int32 (a quad of weights, broadcast by the wide tile).
inline std::int32_t quad_at(const std::int8_t* p) {
  std::int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// float(v), lane by lane. This SIMDe has no 512-bit conversion, so the emulated copy
/// converts two halves; exact either way (block sums lie far within 2^24).
inline simde__m512 to_floats(simde__m512i v) {
#if defined(SIMDE_X86_AVX512F_NATIVE)
  return _mm512_cvtepi32_ps(v);
#else
  return simde_mm512_insertf32x8(
      simde_mm512_castps256_ps512(
          simde_mm256_cvtepi32_ps(simde_mm512_castsi512_si256(v))),
      simde_mm256_cvtepi32_ps(simde_mm512_extracti64x4_epi64(v, 1)), 1);
#endif
}

/// prepare_wide_fn for format F (Note [wide tiles]).
template <block_format F>
wide_weights prepare_wide(const weight_rows& w, std::int64_t blocks, std::int8_t* quants,
                          std::int32_t* offsets, float* scales) {
  const __m256i ones = _mm256_set1_epi8(1);
  for (std::int64_t b = 0; b < blocks; ++b) {
    __m256i quad_sums[group_rows];
    for (int k = 0; k < group_rows; ++k) {
      __m256i v =
          _mm256_load_si256(reinterpret_cast<const __m256i*>(unit_at<F>(w, b, k)));
      if constexpr (F == block_format::q4_0) { // Note [quant units]: q = w + 8
        v = _mm256_sub_epi8(_mm256_and_si256(b % 2 == 0 ? v : _mm256_srli_epi16(v, 4),
                                             _mm256_set1_epi8(15)),
                            _mm256_set1_epi8(8));
        _mm256_storeu_si256(
            reinterpret_cast<__m256i*>(quants + (b * group_rows + k) * block_width), v);
      }
      quad_sums[k] = simde_mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, v);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(offsets + b * group_rows),
                        _mm256_sub_epi32(_mm256_setzero_si256(),
                                         _mm256_slli_epi32(sums_of_eight(quad_sums), 7)));
    _mm256_storeu_ps(scales + b * group_rows,
                     _mm256_cvtph_ps(_mm_loadu_si128(
                         reinterpret_cast<const __m128i*>(w.scales + b * group_rows))));
  }
  return {F == block_format::q8_0 ? reinterpret_cast<const std::int8_t*>(w.quants)
                                  : quants,
          offsets, scales};
}

} // namespace

wide_weights prepare_wide_q8_0(const weight_rows& w, std::int64_t blocks,
                               std::int8_t* quants, std::int32_t* offsets,
                               float* scales) {
  return prepare_wide<block_format::q8_0>(w, blocks, quants, offsets, scales);
}

wide_weights prepare_wide_q4_0(const weight_rows& w, std::int64_t blocks,
                               std::int8_t* quants, std::int32_t* offsets,
                               float* scales) {
  return prepare_wide<block_format::q4_0>(w, blocks, quants, offsets, scales);
}

void wide_dot(const wide_weights& w, const wide_activations& x, float* out) {
  constexpr int quads = block_width / 4;
  simde__m512 acc[group_rows];
  for (auto& a : acc)
    a = simde_mm512_setzero_ps();
  for (std::int64_t b = 0; b < x.blocks; ++b) {
    const std::int8_t* weights = w.quants + b * group_rows * block_width;
    const std::uint8_t* rows = x.quants + b * block_width * wide_tile_rows;
    simde__m512i sums[group_rows];
    for (int k = 0; k < group_rows; ++k)
      sums[k] = simde_mm512_set1_epi32(w.offsets[b * group_rows + k]);
    for (int j = 0; j < quads; ++j) {
      const simde__m512i activations = simde_mm512_loadu_si512(rows + j * 64);
      for (int k = 0; k < group_rows; ++k)
        sums[k] = simde_mm512_dpbusd_epi32(
            sums[k], activations,
            simde_mm512_set1_epi32(quad_at(weights + k * block_width + 4 * j)));
    }
    const simde__m512 dx = simde_mm512_loadu_ps(x.scales + b * wide_tile_rows);
    for (int k = 0; k < group_rows; ++k)
      acc[k] = simde_mm512_fmadd_ps(
          to_floats(sums[k]),
          simde_mm512_mul_ps(simde_mm512_set1_ps(w.scales[b * group_rows + k]), dx),
          acc[k]);
  }
  for (int k = 0; k < group_rows; ++k)
    simde_mm512_storeu_ps(out + k * wide_tile_rows, acc[k]);
}

void dot_q8_0(const weight_rows& w, const activation_blocks& x, int n, float* out) {
  group_dot<vnni_pairs, block_format::q8_0>(w, x, n, out);
}

void dot_q4_0(const weight_rows& w, const activation_blocks& x, int n, float* out) {
  group_dot<vnni_pairs, block_format::q4_0>(w, x, n, out);
}

} // namespace canopy::backends::CANOPY_AVX512_NAMESPACE
