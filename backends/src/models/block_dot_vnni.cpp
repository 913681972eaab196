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

#include <simde/x86/avx512/dpbusd.h>

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

} // namespace

void dot_q8_0(const weight_rows& w, const activation_blocks& x, int n, float* out) {
  group_dot<vnni_pairs, block_format::q8_0>(w, x, n, out);
}

void dot_q4_0(const weight_rows& w, const activation_blocks& x, int n, float* out) {
  group_dot<vnni_pairs, block_format::q4_0>(w, x, n, out);
}

} // namespace canopy::backends::CANOPY_AVX512_NAMESPACE
