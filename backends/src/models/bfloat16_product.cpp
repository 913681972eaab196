#include "models/bfloat16_product.hpp"

#include "models/avx2_target.hpp"
#include "models/blas_product.hpp"
#include "models/block_dot.hpp"

#include <ATen/Parallel.h>
#include <cblas.h>
#include <emmintrin.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <vector>

namespace canopy::backends {

namespace {

constexpr std::int64_t panel_floats = 32 << 10;

float widen(std::uint16_t bits) {
  const std::uint32_t widened = std::uint32_t{bits} << 16;
  float out;
  std::memcpy(&out, &widened, sizeof out);
  return out;
}

// Note [bfloat16 decoding]
// One or two activation rows (decoding) are bound by the weights' bytes: AVX2 kernels
// widen each weight in a register on its way from memory into an FMA, so the weights
// are read once, 2 bytes each, and nothing is written. One weight row at a time (one
// sequential stream for the prefetcher), four accumulators per activation row (FMA's
// latency), 32 weights a step. More activation rows go through BLAS over widened
// panels (multiply_bfloat16), where each weight serves every row and widening costs
// nothing beside the products.
constexpr std::int64_t step = 32;

/// out[i * outputs + o] (= or +=) x_i . w_o for o in [first, last) and i < N.
template <int N>
CANOPY_AVX2 void decode_rows(const std::uint16_t* w, std::int64_t inputs,
                             std::int64_t outputs, std::int64_t first, std::int64_t last,
                             const float* x, float* y, bool accumulate) {
  const auto whole = inputs / step * step;
  for (auto o = first; o < last; ++o) {
    const std::uint16_t* row = w + o * inputs;
    __m256 acc[N][4];
    for (auto& lanes : acc)
      for (auto& a : lanes)
        a = _mm256_setzero_ps();
    for (std::int64_t j = 0; j < whole; j += step)
      for (int q = 0; q < 4; ++q) {
        const auto bits =
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + j + 8 * q));
        const auto weights =
            _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
        for (int i = 0; i < N; ++i)
          acc[i][q] = _mm256_fmadd_ps(
              weights, _mm256_loadu_ps(x + i * inputs + j + 8 * q), acc[i][q]);
      }
    for (int i = 0; i < N; ++i) {
      float sum = horizontal_sum(_mm256_add_ps(_mm256_add_ps(acc[i][0], acc[i][1]),
                                               _mm256_add_ps(acc[i][2], acc[i][3])));
      for (auto j = whole; j < inputs; ++j)
        sum += widen(row[j]) * x[i * inputs + j];
      float& target = y[i * outputs + o];
      target = accumulate ? target + sum : sum;
    }
  }
}

/// multiply_bfloat16 for up to two rows x, by the AVX2 kernels.
void decode_avx2(const float* x, std::int64_t rows, const at::Tensor& w, float* y,
                 bool accumulate) {
  const auto outputs = w.size(0), inputs = w.size(1);
  const std::uint16_t* weights = bfloat16_bits(w);
  // A task of fewer than ~64k multiply-adds costs more to hand out than to run.
  const auto grain = std::max<std::int64_t>(1, (std::int64_t{1} << 16) / (rows * inputs));
  at::parallel_for(0, outputs, grain, [&](std::int64_t begin, std::int64_t end) {
    if (rows == 1)
      decode_rows<1>(weights, inputs, outputs, begin, end, x, y, accumulate);
    else
      decode_rows<2>(weights, inputs, outputs, begin, end, x, y, accumulate);
  });
}

} // namespace

const char* bfloat16_kernels_here() {
  static const char* chosen =
      std::string_view(block_kernels_here().isa) == "portable" ? "portable" : "avx2";
  return chosen;
}

const std::uint16_t* bfloat16_bits(const at::Tensor& w, std::int64_t row) {
  return reinterpret_cast<const std::uint16_t*>(w.data_ptr<at::BFloat16>()) +
         row * w.size(1);
}

std::int64_t bfloat16_panel_rows(std::int64_t inputs) {
  return std::max<std::int64_t>(1, panel_floats / inputs);
}

void widen_bfloat16(const std::uint16_t* bits, std::int64_t count, float* out) {
  // A bfloat16 is a float32's upper half: interleaving zeros below each value (SSE2,
  // every x86-64 CPU) widens eight a step.
  const __m128i zero = _mm_setzero_si128();
  std::int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bits + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm_unpacklo_epi16(zero, v));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i + 4),
                     _mm_unpackhi_epi16(zero, v));
  }
  for (; i < count; ++i)
    out[i] = widen(bits[i]);
}

void multiply_bfloat16(const float* x, std::int64_t rows, const at::Tensor& w, float* y,
                       bool accumulate) {
  static_assert(max_rows_by_gemv == 2, "decode_avx2 takes one or two rows");
  static const bool decode_kernels = std::string_view(bfloat16_kernels_here()) == "avx2";
  if (rows <= max_rows_by_gemv && decode_kernels)
    decode_avx2(x, rows, w, y, accumulate);
  else
    multiply_bfloat16_panels(x, rows, w, y, accumulate);
}

void multiply_bfloat16_panels(const float* x, std::int64_t rows, const at::Tensor& w,
                              float* y, bool accumulate) {
  const auto outputs = w.size(0), inputs = w.size(1);
  const auto panel = bfloat16_panel_rows(inputs);
  const auto panels = (outputs + panel - 1) / panel;
  const std::uint16_t* weights = bfloat16_bits(w);
  const float beta = accumulate ? 1.0f : 0.0f;
  const auto m = static_cast<int>(rows), k = static_cast<int>(inputs);
  // Panels are split over ATen's threads; each widens 128 KB of weights (or one row)
  // and multiplies them by every row of x, worth a task of its own.
  at::parallel_for(0, panels, 1, [&](std::int64_t begin, std::int64_t end) {
    thread_local std::vector<float> scratch;
    scratch.resize(static_cast<std::size_t>(panel * inputs));
    for (auto p = begin; p < end; ++p) {
      const auto first = p * panel;
      const auto n = static_cast<int>(std::min(panel, outputs - first));
      widen_bfloat16(weights + first * inputs, n * inputs, scratch.data());
      // Few rows without AVX2: Note [gemv for few rows] (blas_product.cpp).
      if (rows > max_rows_by_gemv) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k,
                    scratch.data(), k, beta, y + first, static_cast<int>(outputs));
        continue;
      }
      for (int r = 0; r < m; ++r)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, scratch.data(), k,
                    x + static_cast<std::int64_t>(r) * k, 1, beta,
                    y + static_cast<std::int64_t>(r) * outputs + first, 1);
    }
  });
}

} // namespace canopy::backends
