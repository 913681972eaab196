#include "models/block_dot.hpp"

#include "models/block_dot_vnni.hpp"

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

// Everything from here to the pop is compiled for AVX2, FMA and F16C: the tile
// (block_group_tile.hpp) and the AVX2 kernel and quantizer, which callers take only
// where the CPU has them (avx2_block_kernels). Every other header is included above,
// so no library code is compiled under the pragma.
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#include "models/block_group_tile.hpp"

namespace canopy::backends {
namespace {

// maddubs multiplies unsigned by signed bytes. An int8 weight's sign moves onto the
// activation: |w| (x sign w) = w x; |w| <= 128 and |x| <= 127 keep each pair's sum
// within int16. An int4 weight is stored unsigned, q = w + 8, and the tile subtracts
// 8 times the activation block's sum (offset_shift 3).
struct avx2_pairs {
  template <block_format F>
  static constexpr int offset_shift = F == block_format::q8_0 ? -1 : 3;

  template <block_format F, int Half, int N>
  static void products(__m256i unit, const __m256i (&x)[N], __m256i* out) {
    const __m256i ones = _mm256_set1_epi16(1);
    if constexpr (F == block_format::q8_0) {
      const __m256i magnitude = _mm256_sign_epi8(unit, unit);
      for (int i = 0; i < N; ++i)
        out[i] = _mm256_madd_epi16(
            _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(x[i], unit)), ones);
    } else { // Note [quant units]
      const __m256i q = _mm256_and_si256(Half == 0 ? unit : _mm256_srli_epi16(unit, 4),
                                         _mm256_set1_epi8(15));
      for (int i = 0; i < N; ++i)
        out[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(q, x[i]), ones);
    }
  }
};

/// One whole block: its quants, scale and sum of quants.
void quantize_block_avx2(const float* v, std::int8_t* out, float* d, std::int32_t* s) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  __m256 part[4];
  __m256 top = _mm256_setzero_ps();
  for (int j = 0; j < 4; ++j) {
    part[j] = _mm256_loadu_ps(v + 8 * j);
    top = _mm256_max_ps(top, _mm256_andnot_ps(sign_bit, part[j]));
  }
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(top), _mm256_extractf128_ps(top, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  const float scale = _mm_cvtss_f32(m) / 127;
  const __m256 inverse = _mm256_set1_ps(scale != 0 ? 1 / scale : 0);
  __m256i ints[4];
  for (int j = 0; j < 4; ++j) // cvtps rounds half to even, as nearbyint does
    ints[j] = _mm256_cvtps_epi32(_mm256_mul_ps(part[j], inverse));
  // Packing interleaves 128-bit lanes; the permute puts the bytes back in order.
  const __m256i words = _mm256_packs_epi32(ints[0], ints[1]);
  const __m256i words2 = _mm256_packs_epi32(ints[2], ints[3]);
  const __m256i bytes = _mm256_permutevar8x32_epi32(
      _mm256_packs_epi16(words, words2), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), bytes);
  const __m256i all = _mm256_add_epi32(_mm256_add_epi32(ints[0], ints[1]),
                                       _mm256_add_epi32(ints[2], ints[3]));
  __m128i sum =
      _mm_add_epi32(_mm256_castsi256_si128(all), _mm256_extracti128_si256(all, 1));
  sum = _mm_add_epi32(sum, _mm_unpackhi_epi64(sum, sum));
  sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 1));
  *d = scale;
  *s = _mm_cvtsi128_si32(sum);
}

/// quantize_activations with whole blocks in registers; a partial block goes the
/// portable way (the same arithmetic).
void quantize_avx2(const float* x, std::int64_t rows, std::int64_t inputs,
                   std::int64_t blocks, std::int8_t* q, float* d, std::int32_t* s) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * inputs;
    std::int8_t* out = q + r * blocks * block_width;
    std::int64_t b = 0;
    for (; (b + 1) * block_width <= inputs; ++b)
      quantize_block_avx2(in + b * block_width, out + b * block_width, d + b * rows + r,
                          s + b * rows + r);
    if (b < blocks) // the partial block, as a one-row, one-block matrix of its own
      quantize_activations(in + b * block_width, 1, inputs - b * block_width, 1,
                           out + b * block_width, d + b * rows + r, s + b * rows + r);
  }
}

} // namespace
} // namespace canopy::backends
#pragma GCC pop_options

namespace canopy::backends {

void quantize_activations(const float* x, std::int64_t rows, std::int64_t inputs,
                          std::int64_t blocks, std::int8_t* q, float* d,
                          std::int32_t* s) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * inputs;
    std::int8_t* out = q + r * blocks * block_width;
    for (std::int64_t b = 0; b < blocks; ++b) {
      const auto first = b * block_width;
      const auto n = std::min(block_width, inputs - first);
      float amax = 0;
      for (std::int64_t j = 0; j < n; ++j)
        amax = std::max(amax, std::fabs(in[first + j]));
      const float scale = amax / 127;
      const float inverse = scale != 0 ? 1 / scale : 0;
      std::int32_t sum = 0;
      for (std::int64_t j = 0; j < n; ++j) {
        out[first + j] =
            static_cast<std::int8_t>(std::nearbyint(in[first + j] * inverse));
        sum += out[first + j];
      }
      std::fill(out + first + n, out + first + block_width, std::int8_t{0});
      d[b * rows + r] = scale;
      s[b * rows + r] = sum;
    }
  }
}

void pack_wide_rows(const activation_blocks& x, std::int64_t first, std::int64_t n,
                    std::uint8_t* quants, float* scales) {
  constexpr std::int64_t quads = block_width / 4;
  constexpr std::uint32_t offset = 0x80808080; // x + 128, byte by byte: its sign bit
  for (std::int64_t b = 0; b < x.blocks; ++b) {
    for (std::int64_t j = 0; j < quads; ++j)
      for (std::int64_t i = 0; i < wide_tile_rows; ++i) {
        std::uint32_t quad = 0;
        if (i < n)
          std::memcpy(&quad, x.quants + (first + i) * x.stride + b * block_width + 4 * j,
                      sizeof quad);
        quad ^= offset;
        std::memcpy(quants + ((b * quads + j) * wide_tile_rows + i) * 4, &quad,
                    sizeof quad);
      }
    for (std::int64_t i = 0; i < wide_tile_rows; ++i)
      scales[b * wide_tile_rows + i] = i < n ? x.scales[b * x.rows + first + i] : 0.0f;
  }
}

namespace {

/// Row k's quant unit holding block b (Note [quant units]).
template <block_format F>
const std::uint8_t* unit_of(const weight_rows& w, std::int64_t b, int k) {
  return w.quants + unit_offset(F, b) + k * unit_bytes;
}

/// Note [exact block sums], pair by pair.
template <block_format F>
void dot_portable(const weight_rows& w, const activation_blocks& x, int n, float* out) {
  for (int k = 0; k < group_rows; ++k)
    for (int i = 0; i < n; ++i) {
      const std::int8_t* row = x.quants + i * x.stride;
      float sum = 0;
      for (std::int64_t b = 0; b < x.blocks; ++b) {
        std::int32_t block = 0;
        for (int j = 0; j < block_width; ++j)
          block += quant_value(F, unit_of<F>(w, b, k), b, j) * row[b * block_width + j];
        const float scale =
            from_half_bits(w.scales[b * group_rows + k]) * x.scales[b * x.rows + i];
        sum = std::fma(static_cast<float>(block), scale, sum);
      }
      out[k * n + i] = sum;
    }
}

/// AVX2, FMA and F16C (GCC 12's __builtin_cpu_supports knows no "f16c"; CPUID leaf 1
/// tells).
bool cpu_has_avx2() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    return false;
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
}

// Note [kernels by tile]
// On a Zen 5 EPYC the VNNI kernels ran batched int8 passes faster than the AVX2 ones
// (scoring +15%, SMC +6%) and a lone decoding row 15% slower; the same sign as an
// earlier Xeon's decode. Both give the same bits (Note [exact block sums]), so a
// product may take either tile by tile: four-row tiles take VNNI, the one- and two-row
// ones (decoding, a chunk's last rows) AVX2. Batches of eight rows and more take VNNI's
// wide tiles of sixteen (Note [wide tiles]) in either VNNI set.
template <block_format F>
void dot_by_tile(const weight_rows& w, const activation_blocks& x, int n, float* out) {
  if (n == max_tile_rows)
    (F == block_format::q8_0 ? avx512_vnni::dot_q8_0 : avx512_vnni::dot_q4_0)(w, x, n,
                                                                              out);
  else
    group_dot<avx2_pairs, F>(w, x, n, out);
}

} // namespace

const block_kernels& portable_block_kernels() {
  static const block_kernels k{"portable", dot_portable<block_format::q8_0>,
                               dot_portable<block_format::q4_0>, quantize_activations};
  return k;
}

std::optional<block_kernels> avx2_block_kernels() {
  if (!cpu_has_avx2())
    return std::nullopt;
  return block_kernels{"avx2", group_dot<avx2_pairs, block_format::q8_0>,
                       group_dot<avx2_pairs, block_format::q4_0>, quantize_avx2};
}

std::optional<block_kernels> avx512_vnni_block_kernels() {
  // __builtin_cpu_supports also asks the OS (XGETBV) whether it saves the 512-bit
  // registers.
  if (!cpu_has_avx2() || !__builtin_cpu_supports("avx512f") ||
      !__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vl") ||
      !__builtin_cpu_supports("avx512vnni"))
    return std::nullopt;
  return block_kernels{"avx512_vnni",
                       avx512_vnni::dot_q8_0,
                       avx512_vnni::dot_q4_0,
                       quantize_avx2,
                       avx512_vnni::prepare_wide_q8_0,
                       avx512_vnni::prepare_wide_q4_0,
                       avx512_vnni::wide_dot};
}

std::optional<block_kernels> by_tile_block_kernels() {
  auto vnni = avx512_vnni_block_kernels();
  if (!vnni)
    return std::nullopt;
  vnni->isa = "avx512_vnni+avx2";
  vnni->q8_0 = dot_by_tile<block_format::q8_0>;
  vnni->q4_0 = dot_by_tile<block_format::q4_0>;
  return vnni;
}

block_kernels choose_block_kernels(const std::string& asked,
                                   const std::string& aten_capability) {
  if (!asked.empty() && asked != "portable" && asked != "avx2" &&
      asked != "avx512_vnni" && asked != "avx512_vnni+avx2")
    throw std::invalid_argument("CANOPY_BLOCK_KERNELS='" + asked +
                                "' is not one of portable, avx2, avx512_vnni, "
                                "avx512_vnni+avx2");
  if (asked == "portable" || (asked.empty() && aten_capability == "default"))
    return portable_block_kernels();
  // Without a name, VNNI where the CPU has it and ATen may use AVX-512, for the tiles
  // where it is faster (Note [kernels by tile]).
  const bool by_tile =
      asked == "avx512_vnni+avx2" || (asked.empty() && aten_capability != "avx2");
  if (by_tile)
    if (auto mixed = by_tile_block_kernels())
      return *mixed;
  if (asked == "avx512_vnni")
    if (auto vnni = avx512_vnni_block_kernels())
      return *vnni;
  if (auto avx2 = avx2_block_kernels())
    return *avx2;
  return portable_block_kernels();
}

const block_kernels& block_kernels_here() {
  static const block_kernels chosen = [] {
    auto env = [](const char* name) {
      const char* value = std::getenv(name);
      return std::string(value != nullptr ? value : "");
    };
    return choose_block_kernels(env("CANOPY_BLOCK_KERNELS"), env("ATEN_CPU_CAPABILITY"));
  }();
  return chosen;
}

} // namespace canopy::backends
