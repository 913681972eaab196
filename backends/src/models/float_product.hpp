#pragma once
// The float32 products of the direct forward on CPUs with AVX-512, Canopy's own:
// y[rows, out] (= or +=) x[rows, in] w[in, out] over the forward's [in, out] weights
// (rows `stride` floats apart), for any number of rows.
//
// Note [float32 decoding]
// One row decoding alone reads every weight once per token, so its products run at the
// memory's speed. OpenBLAS 0.3.21's sgemv streamed a 768 x 32000 weight at 30-33 GB/s on
// one core of an AMD EPYC Zen 5, whichever of its kernel sets it ran; this kernel, at
// 35-37 GB/s (the same core, microbenchmarks of the shapes of a 110M Llama): it takes
// a block of 128 outputs (eight 512-bit accumulators a row) down all the inputs, so
// every weight goes from memory into one FMA and nothing is written until the block is
// done, and it prefetches the block eight input rows ahead (the rows are `stride`
// floats apart, a stride the hardware prefetcher follows late). Two rows share each
// weight load. Where the CPU has AVX2 alone the same loop, with half the lanes, was no
// faster than sgemv (28-29 GB/s), so those CPUs keep BLAS.
//
// Note [float32 tiles]
// Three rows and more (SMC's particles, a scoring pass) are bound by arithmetic. The
// machines of this kind may pin OpenBLAS to its AVX2 kernels (OPENBLAS_CORETYPE, set
// where its AVX-512 ones are not trusted: blas_core.hpp), ~110 GFLOP/s on one Zen 5
// core. Here each block of 64 outputs and up to 512 inputs is packed once into this
// thread's scratch (contiguous, 128 KB, in L2) and multiplied by every row of x, six
// rows at a time: 24 accumulators, each packed vector loaded once for six FMAs, each
// x value broadcast once for four. Rows go in chunks of 64, whose x stays in L2 while
// the weights stream past once per chunk.
//
// float_product_avx512.cpp is compiled twice, as the VNNI block kernels are
// (block_dot_vnni.hpp): into the library with AVX-512 enabled (namespace avx512_float,
// to be called only where the CPU has AVX512F: float_product_here checks), and into
// the tests with AVX2 alone, SIMDe carrying out the 512-bit instructions (namespace
// avx512_float_emulated), so the suite checks the kernels' arithmetic on AVX2-only
// machines too.
// Thread contract: pure functions (each call's scratch its caller's); the choice of
// float_product_here is made once.

#include <cstdint>

namespace canopy::backends {

/// Floats of scratch a product needs (a packed block of weights).
constexpr std::int64_t float_product_scratch_floats = 512 * 64;

/// y[r * out + o] (= or +=) sum_i x[r * in + i] w[i * stride + o] for rows r < `rows`
/// and outputs o in [first, last); `first` a multiple of 64, `stride` >= out; `scratch`
/// float_product_scratch_floats long, 64-byte aligned. One or two rows: each output's
/// sum runs over i in order, one FMA a term, y's old value added last when
/// `accumulate`. More rows: the same per run of 512 inputs, each run's sum added to y.
using float_product_signature = void(const float* x, std::int64_t rows, const float* w,
                                     std::int64_t in, std::int64_t out,
                                     std::int64_t stride, std::int64_t first,
                                     std::int64_t last, float* y, bool accumulate,
                                     float* scratch);
using float_product_fn = float_product_signature*;

namespace avx512_float {
float_product_signature product;
}
namespace avx512_float_emulated { // in the test executables only
float_product_signature product;
}

/// The kernels' entry here: avx512_float's where the CPU has AVX512F (and the OS
/// saves its registers) and ATEN_CPU_CAPABILITY does not ask for less ("avx2" or
/// "default", as the suite's `.as_on_avx2` runs do); nullptr elsewhere (BLAS then).
float_product_fn float_product_here();

/// "avx512" where float_product_here has a kernel, "blas" where BLAS runs.
const char* float_product_kernels_here();

/// `kernel` over all of y's outputs, split over ATen's intra-op threads, each with its
/// own scratch.
void multiply_avx512(float_product_fn kernel, const float* x, std::int64_t rows,
                     const float* w, std::int64_t in, std::int64_t out,
                     std::int64_t stride, float* y, bool accumulate);

} // namespace canopy::backends
