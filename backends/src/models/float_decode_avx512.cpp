// The AVX-512 float32 decoding kernel (float_decode.hpp, Note [float32 decoding]).
// Compiled with AVX-512 enabled for the whole file, so nothing here may have external
// linkage but the kernel itself (no header's inline functions called at run time, no
// library templates): a copy the linker kept from here would be AVX-512 code in every
// caller. The test `avx512_float_kernel_exports_only_itself` reads the object's symbols.
//
// The 512-bit operations are written with SIMDe's names (Debian's libsimde-dev): the
// native instructions where the file is compiled with AVX-512, AVX2 pairs in the
// tests' emulated copy.
#include "models/float_decode.hpp"

#include <simde/x86/avx512/add.h>
#include <simde/x86/avx512/fmadd.h>
#include <simde/x86/avx512/loadu.h>
#include <simde/x86/avx512/set1.h>
#include <simde/x86/avx512/setzero.h>
#include <simde/x86/avx512/storeu.h>

#ifndef CANOPY_AVX512_NAMESPACE
#error "CANOPY_AVX512_NAMESPACE names the build: avx512_float or avx512_float_emulated"
#endif

namespace canopy::backends::CANOPY_AVX512_NAMESPACE {

namespace {

constexpr int lanes = 16;
constexpr int block_vectors = 8; // 128 outputs: eight accumulators a row
constexpr int block_outputs = block_vectors * lanes;
// Input rows ahead that a block's weights are prefetched (Note [float32 decoding]).
constexpr std::int64_t prefetch_rows = 8;

/// Outputs [o, o + V * 16) of N rows.
template <int N, int V>
void vectors(const float* x, const float* w, std::int64_t in, std::int64_t out,
             std::int64_t stride, std::int64_t o, float* y, bool accumulate) {
  simde__m512 acc[N][V];
  for (auto& row : acc)
    for (auto& a : row)
      a = simde_mm512_setzero_ps();
  for (std::int64_t i = 0; i < in; ++i) {
    const float* weights = w + i * stride + o;
    // Every other line: the adjacent-line prefetcher brings its neighbour.
    for (int v = 0; v < V; v += 2)
      __builtin_prefetch(weights + prefetch_rows * stride + v * lanes, 0, 3);
    simde__m512 xi[N];
    for (int r = 0; r < N; ++r)
      xi[r] = simde_mm512_set1_ps(x[r * in + i]);
    for (int v = 0; v < V; ++v) {
      const simde__m512 wv = simde_mm512_loadu_ps(weights + v * lanes);
      for (int r = 0; r < N; ++r)
        acc[r][v] = simde_mm512_fmadd_ps(wv, xi[r], acc[r][v]);
    }
  }
  for (int r = 0; r < N; ++r)
    for (int v = 0; v < V; ++v) {
      float* target = y + r * out + o + v * lanes;
      simde_mm512_storeu_ps(
          target, accumulate ? simde_mm512_add_ps(simde_mm512_loadu_ps(target), acc[r][v])
                             : acc[r][v]);
    }
}

/// Output o of N rows, past the last whole vector.
template <int N>
void single(const float* x, const float* w, std::int64_t in, std::int64_t out,
            std::int64_t stride, std::int64_t o, float* y, bool accumulate) {
  float sum[N] = {};
  for (std::int64_t i = 0; i < in; ++i)
    for (int r = 0; r < N; ++r)
      sum[r] = __builtin_fmaf(x[r * in + i], w[i * stride + o], sum[r]);
  for (int r = 0; r < N; ++r)
    y[r * out + o] = accumulate ? y[r * out + o] + sum[r] : sum[r];
}

template <int N>
void decode_rows(const float* x, const float* w, std::int64_t in, std::int64_t out,
                 std::int64_t stride, std::int64_t first, std::int64_t last, float* y,
                 bool accumulate) {
  auto o = first;
  for (; o + block_outputs <= last; o += block_outputs)
    vectors<N, block_vectors>(x, w, in, out, stride, o, y, accumulate);
  for (; o + lanes <= last; o += lanes)
    vectors<N, 1>(x, w, in, out, stride, o, y, accumulate);
  for (; o < last; ++o)
    single<N>(x, w, in, out, stride, o, y, accumulate);
}

} // namespace

void decode_in_out(const float* x, int rows, const float* w, std::int64_t in,
                   std::int64_t out, std::int64_t stride, std::int64_t first,
                   std::int64_t last, float* y, bool accumulate) {
  if (rows == 1)
    decode_rows<1>(x, w, in, out, stride, first, last, y, accumulate);
  else
    decode_rows<2>(x, w, in, out, stride, first, last, y, accumulate);
}

} // namespace canopy::backends::CANOPY_AVX512_NAMESPACE
