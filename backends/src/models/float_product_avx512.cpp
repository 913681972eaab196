// The AVX-512 float32 products (float_product.hpp: Notes [float32 decoding] and
// [float32 tiles]). Compiled with AVX-512 enabled for the whole file, so nothing here
// may have external linkage but the entry itself (no header's inline functions called
// at run time, no library templates): a copy the linker kept from here would be
// AVX-512 code in every caller. The test `avx512_float_kernel_exports_only_itself`
// reads the object's symbols.
//
// The 512-bit operations are written with SIMDe's names (Debian's libsimde-dev): the
// native instructions where the file is compiled with AVX-512, AVX2 pairs in the
// tests' emulated copy.
#include "models/float_product.hpp"

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

std::int64_t smaller(std::int64_t a, std::int64_t b) {
  return a < b ? a : b;
}

// Note [partial vectors]
// A run of outputs that is not a multiple of 16 ends in a partial vector, loaded and
// stored through a mask, so that its lanes take the same FMAs in the same order as a
// whole vector's and nothing past the run is read (the rows may be padded: Note
// [padded rows]). It shares its pass with the run's other vectors: stories260K's
// 64-wide products, done a vector at a time and their last eight outputs one by one,
// were chains of dependent FMAs, four cycles each. SIMDe has no masked 512-bit loads
// and stores, so the emulated copy goes through a buffer.

/// p's first n lanes (1 <= n <= 16), the others zero.
inline simde__m512 load_first(const float* p, int n) {
#if defined(SIMDE_X86_AVX512F_NATIVE)
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p);
#else
  float buffer[lanes] = {};
  for (int i = 0; i < n; ++i)
    buffer[i] = p[i];
  return simde_mm512_loadu_ps(buffer);
#endif
}

/// v's first n lanes into p.
inline void store_first(float* p, simde__m512 v, int n) {
#if defined(SIMDE_X86_AVX512F_NATIVE)
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1), v);
#else
  float buffer[lanes];
  simde_mm512_storeu_ps(buffer, v);
  for (int i = 0; i < n; ++i)
    p[i] = buffer[i];
#endif
}

/// Whether vector v of V is a partial one: the last, `last_lanes` (< 16) wide.
template <int V> constexpr bool partial(int v, int last_lanes) {
  return v == V - 1 && last_lanes < lanes;
}

/// Vector v of V at p, whose last vector has `last_lanes` lanes (16: whole).
template <int V> inline simde__m512 load_vector(const float* p, int v, int last_lanes) {
  return partial<V>(v, last_lanes) ? load_first(p, last_lanes) : simde_mm512_loadu_ps(p);
}

/// `value` into vector v of V at p, whose last vector has `last_lanes` lanes.
template <int V>
inline void store_vector(float* p, int v, int last_lanes, simde__m512 value) {
  if (partial<V>(v, last_lanes))
    store_first(p, value, last_lanes);
  else
    simde_mm512_storeu_ps(p, value);
}

/// acc (stored into, or added to) the V vectors of `target`, the last `last_lanes` wide.
template <int V>
void store(const simde__m512 (&acc)[V], float* target, bool add, int last_lanes) {
  for (int v = 0; v < V; ++v) {
    float* p = target + v * lanes;
    store_vector<V>(p, v, last_lanes,
                    add ? simde_mm512_add_ps(load_vector<V>(p, v, last_lanes), acc[v])
                        : acc[v]);
  }
}

/// N as a type, for a generic lambda to take as its argument.
template <int N> struct count { static constexpr int value = N; };

/// f(count<n>{}) for 1 <= n <= Max: a run-time count as a compile-time one (the
/// vectors of a run's end, the rows of a last tile).
template <int Max, class F> void with_count(int n, const F& f) {
  if constexpr (Max > 0) {
    if (n == Max)
      return f(count<Max>{});
    with_count<Max - 1>(n, f);
  }
}

// Input rows ahead that weights are prefetched where they come from memory (Note
// [float32 decoding]).
constexpr std::int64_t prefetch_rows = 8;

/// y's M rows' V vectors (= or +=) x's M rows times `weights` over `inputs` inputs:
/// input k's V vectors at weights + k * row_stride, the last `last_lanes` wide (Note
/// [partial vectors]). Each accumulator adds its terms in input order, one FMA a term.
/// With Prefetch, the weights of the input prefetch_rows ahead are asked for (decoding,
/// straight from the weight matrix); a packed block (tiles) is in cache already.
template <int M, int V, bool Prefetch>
void columns(const float* x, std::int64_t in, const float* weights,
             std::int64_t row_stride, std::int64_t inputs, float* y, std::int64_t out,
             bool add, int last_lanes) {
  simde__m512 acc[M][V];
  for (auto& row : acc)
    for (auto& a : row)
      a = simde_mm512_setzero_ps();
  for (std::int64_t k = 0; k < inputs; ++k) {
    const float* row = weights + k * row_stride;
    if constexpr (Prefetch) // every other line: the adjacent-line prefetcher brings the
                            // rest
      for (int v = 0; v < V; v += 2)
        __builtin_prefetch(row + prefetch_rows * row_stride + v * lanes, 0, 3);
    simde__m512 wv[V];
    for (int v = 0; v < V; ++v)
      wv[v] = load_vector<V>(row + v * lanes, v, last_lanes);
    for (int r = 0; r < M; ++r) {
      const simde__m512 xr = simde_mm512_set1_ps(x[r * in + k]);
      for (int v = 0; v < V; ++v)
        acc[r][v] = simde_mm512_fmadd_ps(wv[v], xr, acc[r][v]);
    }
  }
  for (int r = 0; r < M; ++r)
    store(acc[r], y + r * out, add, last_lanes);
}

/// The vectors of outputs [o, last) and their last one's lanes: the end of a run.
struct run_end {
  int vectors, last_lanes;
};
inline run_end end_of(std::int64_t o, std::int64_t last) {
  const auto left = static_cast<int>(last - o);
  const int vectors = (left + lanes - 1) / lanes;
  return {vectors, left - (vectors - 1) * lanes};
}

// ---- One or two rows (Note [float32 decoding]).

constexpr int decode_vectors = 8; // 128 outputs: eight accumulators a row

template <int N>
void decode(const float* x, const float* w, std::int64_t in, std::int64_t out,
            std::int64_t stride, std::int64_t first, std::int64_t last, float* y,
            bool accumulate) {
  auto o = first;
  for (; o + decode_vectors * lanes <= last; o += decode_vectors * lanes)
    columns<N, decode_vectors, true>(x, in, w + o, stride, in, y + o, out, accumulate,
                                     lanes);
  if (o == last)
    return;
  const auto end = end_of(o, last);
  with_count<decode_vectors>(end.vectors, [&](auto v) {
    columns<N, decltype(v)::value, true>(x, in, w + o, stride, in, y + o, out, accumulate,
                                         end.last_lanes);
  });
}

// ---- Three rows and more (Note [float32 tiles]).

constexpr int tile_rows = 6;
constexpr int tile_vectors = 4; // 64 outputs a block
constexpr std::int64_t block_inputs =
    float_product_scratch_floats / (tile_vectors * lanes);
constexpr std::int64_t chunk_rows = 64;

/// packed[k * V * 16 + j] = w[(k0 + k) * stride + o + j]: the block's V vectors of its
/// `inputs` rows, contiguous, the last `last_lanes` wide and zero past them.
template <int V>
void pack(const float* w, std::int64_t stride, std::int64_t k0, std::int64_t inputs,
          std::int64_t o, float* packed, int last_lanes) {
  for (std::int64_t k = 0; k < inputs; ++k) {
    const float* row = w + (k0 + k) * stride + o;
    for (int v = 0; v < V; v += 2)
      __builtin_prefetch(row + prefetch_rows * stride + v * lanes, 0, 3);
    for (int v = 0; v < V; ++v)
      simde_mm512_storeu_ps(packed + (k * V + v) * lanes,
                            load_vector<V>(row + v * lanes, v, last_lanes));
  }
}

/// y rows [0, M) of the block (= or +=) x's M rows times the packed block.
template <int M, int V>
void tile(const float* x, std::int64_t in, const float* packed, std::int64_t inputs,
          float* y, std::int64_t out, bool add, int last_lanes) {
  columns<M, V, false>(x, in, packed, V * lanes, inputs, y, out, add, last_lanes);
}

/// The tiles of one packed block of V vectors over rows [0, rows).
template <int V>
void tiles(const float* x, std::int64_t rows, std::int64_t in, const float* packed,
           std::int64_t inputs, float* y, std::int64_t out, bool add, int last_lanes) {
  std::int64_t r = 0;
  for (; r + tile_rows <= rows; r += tile_rows)
    tile<tile_rows, V>(x + r * in, in, packed, inputs, y + r * out, out, add, last_lanes);
  with_count<tile_rows - 1>(static_cast<int>(rows - r), [&](auto m) {
    tile<decltype(m)::value, V>(x + r * in, in, packed, inputs, y + r * out, out, add,
                                last_lanes);
  });
}

/// Outputs [o, o + V * 16) of all rows (the last vector `last_lanes` wide), a run of
/// block_inputs inputs at a time.
template <int V>
void block(const float* x, std::int64_t rows, const float* w, std::int64_t in,
           std::int64_t out, std::int64_t stride, std::int64_t o, float* y,
           bool accumulate, float* scratch, int last_lanes) {
  for (std::int64_t k0 = 0; k0 < in; k0 += block_inputs) {
    const auto inputs = smaller(block_inputs, in - k0);
    pack<V>(w, stride, k0, inputs, o, scratch, last_lanes);
    tiles<V>(x + k0, rows, in, scratch, inputs, y + o, out, accumulate || k0 > 0,
             last_lanes);
  }
}

void batch(const float* x, std::int64_t rows, const float* w, std::int64_t in,
           std::int64_t out, std::int64_t stride, std::int64_t first, std::int64_t last,
           float* y, bool accumulate, float* scratch) {
  auto o = first;
  for (; o + tile_vectors * lanes <= last; o += tile_vectors * lanes)
    block<tile_vectors>(x, rows, w, in, out, stride, o, y, accumulate, scratch, lanes);
  if (o == last)
    return;
  const auto end = end_of(o, last);
  with_count<tile_vectors>(end.vectors, [&](auto v) {
    block<decltype(v)::value>(x, rows, w, in, out, stride, o, y, accumulate, scratch,
                              end.last_lanes);
  });
}

} // namespace

void product(const float* x, std::int64_t rows, const float* w, std::int64_t in,
             std::int64_t out, std::int64_t stride, std::int64_t first, std::int64_t last,
             float* y, bool accumulate, float* scratch) {
  if (rows == 1)
    return decode<1>(x, w, in, out, stride, first, last, y, accumulate);
  if (rows == 2)
    return decode<2>(x, w, in, out, stride, first, last, y, accumulate);
  for (std::int64_t r = 0; r < rows; r += chunk_rows)
    batch(x + r * in, smaller(chunk_rows, rows - r), w, in, out, stride, first, last,
          y + r * out, accumulate, scratch);
}

} // namespace canopy::backends::CANOPY_AVX512_NAMESPACE
