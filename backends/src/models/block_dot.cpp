#include "models/block_dot.hpp"

#include "models/avx2_target.hpp"
#include "models/block_dot_vnni.hpp"
#include "models/block_tile_shapes.hpp"

#include <cpuid.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace canopy::backends {

void quantize_activations(const float* x, std::int64_t rows, std::int64_t inputs,
                          std::int64_t blocks, std::int8_t* q, float* d) {
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
      for (std::int64_t j = 0; j < n; ++j)
        out[first + j] =
            static_cast<std::int8_t>(std::nearbyint(in[first + j] * inverse));
      std::fill(out + first + n, out + first + block_width, std::int8_t{0});
      d[r * blocks + b] = scale;
    }
  }
}

namespace {

/// Row k's quant unit holding block b (Note [quant units]), k within a tile.
template <block_format F>
const std::uint8_t* unit_of(const weight_rows& w, std::int64_t b, int k) {
  return w.quants + unit_offset(F, b) + k * unit_bytes;
}

template <block_format F>
void dot_portable(const weight_rows& w, int r, const std::int8_t* xq, const float* xd,
                  std::int64_t blocks, std::int64_t x_stride, int n, float* out) {
  for (int k = 0; k < r; ++k)
    for (int i = 0; i < n; ++i) {
      const std::int8_t* x = xq + i * x_stride;
      float sum = 0;
      for (std::int64_t b = 0; b < blocks; ++b) {
        std::int32_t block = 0;
        for (int j = 0; j < block_width; ++j)
          block += quant_value(F, unit_of<F>(w, b, k), b, j) * x[b * block_width + j];
        sum += from_half_bits(w.scales[b * group_rows + k]) * xd[i * blocks + b] *
               static_cast<float>(block);
      }
      out[k * n + i] = sum;
    }
}

// maddubs multiplies unsigned by signed bytes. An int8 weight's sign moves onto the
// activation: |w| (x sign w) = w x; |w| <= 128 and |x| <= 127 keep each pair's sum
// within int16. An int4 weight is stored unsigned, q = w + 8 in [0, 15]: q x summed,
// less 8 x summed over the same four elements of each lane, is w x exactly, and the
// second sum is the activation's alone, made once a block for every row of the tile.
// Either way each int32 lane holds the same four products, so both kernels and the
// portable one agree to float rounding.
//
// Note [independent chains]: each (weight row, activation row) pair adds its blocks
// into its own accumulator, a chain of dependent FMAs (4-5 cycles each on Zen). One
// pair alone ran a block in ~7 cycles, waiting on its chain; R weight rows times N
// activation rows give R N chains to interleave. Every pair still adds the same terms
// in the same order whatever the tile, so the tile never changes an answer.

/// Adds block b of every (weight row k, activation row i) pair of the tile into
/// acc[k][i]. Row k's block is read from its unit: int8 as stored; int4 the q in
/// [0, 15] of the unit's low nibbles (even b) or high ones (odd b).
template <block_format F, int R, int N>
CANOPY_AVX2 inline void add_block(const weight_rows& w, const std::int8_t* xq,
                                  const float* xd, std::int64_t blocks,
                                  std::int64_t x_stride, std::int64_t b,
                                  __m256 (&acc)[R][N]) {
  const __m256i ones = _mm256_set1_epi16(1);
  // The group's scales in one conversion (from the tile's first row on; the matrix
  // pads the array, so a tile that starts mid-group reads no further than its end),
  // times each activation row's scale: every row's d_w d_x in one multiply.
  const __m256 scales = _mm256_cvtph_ps(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales + b * group_rows)));
  __m256i x[N], offset[N];
  __m256 scaled[N];
  for (int i = 0; i < N; ++i) {
    x[i] = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(xq + i * x_stride + b * block_width));
    scaled[i] = _mm256_mul_ps(scales, _mm256_set1_ps(xd[i * blocks + b]));
    if constexpr (F == block_format::q4_0)
      offset[i] =
          _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(8), x[i]), ones);
  }
  for (int k = 0; k < R; ++k) {
    const __m256i unit =
        _mm256_load_si256(reinterpret_cast<const __m256i*>(unit_of<F>(w, b, k)));
    __m256i magnitude;
    if constexpr (F == block_format::q8_0)
      magnitude = _mm256_sign_epi8(unit, unit);
    else // Note [quant units]
      magnitude = _mm256_and_si256(b % 2 == 0 ? unit : _mm256_srli_epi16(unit, 4),
                                   _mm256_set1_epi8(15));
    for (int i = 0; i < N; ++i) {
      __m256i lanes;
      if constexpr (F == block_format::q8_0)
        lanes = _mm256_madd_epi16(
            _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(x[i], unit)), ones);
      else
        lanes = _mm256_sub_epi32(
            _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, x[i]), ones), offset[i]);
      acc[k][i] =
          _mm256_fmadd_ps(_mm256_permutevar8x32_ps(scaled[i], _mm256_set1_epi32(k)),
                          _mm256_cvtepi32_ps(lanes), acc[k][i]);
    }
  }
}

template <block_format F, int R, int N>
CANOPY_AVX2 void dot_avx2_tile(const weight_rows& w, const std::int8_t* xq,
                               const float* xd, std::int64_t blocks,
                               std::int64_t x_stride, float* out) {
  __m256 acc[R][N];
  for (int k = 0; k < R; ++k)
    for (int i = 0; i < N; ++i)
      acc[k][i] = _mm256_setzero_ps();
  // An int4 unit's two blocks in one iteration: no test of b's parity inside.
  constexpr auto per_unit = blocks_per_unit(F);
  std::int64_t b = 0;
  for (; b + per_unit <= blocks; b += per_unit) {
    add_block<F, R, N>(w, xq, xd, blocks, x_stride, b, acc);
    if constexpr (per_unit == 2)
      add_block<F, R, N>(w, xq, xd, blocks, x_stride, b + 1, acc);
  }
  if (b < blocks)
    add_block<F, R, N>(w, xq, xd, blocks, x_stride, b, acc);
  for (int k = 0; k < R; ++k)
    for (int i = 0; i < N; ++i)
      out[k * N + i] = horizontal_sum(acc[k][i]);
}

/// quantize_activations with whole blocks in registers; a partial block goes the
/// portable way (the same arithmetic).
CANOPY_AVX2 void quantize_avx2(const float* x, std::int64_t rows, std::int64_t inputs,
                               std::int64_t blocks, std::int8_t* q, float* d) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * inputs;
    std::int8_t* out = q + r * blocks * block_width;
    std::int64_t b = 0;
    for (; (b + 1) * block_width <= inputs; ++b) {
      const float* v = in + b * block_width;
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
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + b * block_width), bytes);
      d[r * blocks + b] = scale;
    }
    if (b < blocks)
      quantize_activations(in + b * block_width, 1, inputs - b * block_width, 1,
                           out + b * block_width, d + r * blocks + b);
  }
}

template <block_format F>
void dot_avx2(const weight_rows& w, int r, const std::int8_t* xq, const float* xd,
              std::int64_t blocks, std::int64_t x_stride, int n, float* out) {
  dispatch_tile(r, n, [&](auto rows, auto columns) {
    dot_avx2_tile<F, decltype(rows)::value, decltype(columns)::value>(w, xq, xd, blocks,
                                                                      x_stride, out);
  });
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

} // namespace

const block_kernels& portable_block_kernels() {
  static const block_kernels k{"portable", dot_portable<block_format::q8_0>,
                               dot_portable<block_format::q4_0>, quantize_activations};
  return k;
}

std::optional<block_kernels> avx2_block_kernels() {
  if (!cpu_has_avx2())
    return std::nullopt;
  return block_kernels{"avx2", dot_avx2<block_format::q8_0>, dot_avx2<block_format::q4_0>,
                       quantize_avx2};
}

std::optional<block_kernels> avx512_vnni_block_kernels() {
  // __builtin_cpu_supports also asks the OS (XGETBV) whether it saves the 512-bit
  // registers.
  if (!cpu_has_avx2() || !__builtin_cpu_supports("avx512f") ||
      !__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vl") ||
      !__builtin_cpu_supports("avx512vnni"))
    return std::nullopt;
  return block_kernels{"avx512_vnni", avx512_vnni::dot_q8_0, avx512_vnni::dot_q4_0,
                       quantize_avx2};
}

block_kernels choose_block_kernels(const std::string& asked,
                                   const std::string& aten_capability) {
  if (!asked.empty() && asked != "portable" && asked != "avx2" && asked != "avx512_vnni")
    throw std::invalid_argument("CANOPY_BLOCK_KERNELS='" + asked +
                                "' is not one of portable, avx2, avx512_vnni");
  if (asked == "portable" || (asked.empty() && aten_capability == "default"))
    return portable_block_kernels();
  // VNNI only when asked: on the one AVX-512 VNNI CPU measured (a 16-core Xeon, family 6
  // model 207), the AVX2 kernels decoded a 110M Llama 1.2-1.6x faster in int8 and
  // 1.1-1.4x in int4 (docs/benchmarks.md).
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
