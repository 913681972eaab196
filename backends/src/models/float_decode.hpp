#pragma once
// The float32 products of one or two activation rows (decoding) on CPUs with AVX-512:
// y[rows, out] = x[rows, in] w[in, out] over the direct forward's [in, out] weights,
// bound by reading each weight once.
//
// Note [float32 decoding]
// One row decoding alone reads every weight once per token, so its products run at the
// memory's speed. OpenBLAS 0.3.21's sgemv streamed a 768 x 32000 weight at 30-33 GB/s on
// one core of an AMD EPYC Zen 5, whichever of its kernel sets it ran; these kernels, at
// 35-37 GB/s (the same core, /tmp microbenchmarks of the shapes of a 110M Llama): each
// takes a block of 128 outputs (eight 512-bit accumulators a row) down all the inputs,
// so every weight goes from memory into one FMA and nothing is written until the block
// is done, and it prefetches the block eight input rows ahead (the rows are `out`
// floats apart, a stride the hardware prefetcher follows late). Two rows share each
// weight load (sixteen accumulators). Where the CPU has AVX2 alone the same loop, with
// half the lanes, was no faster than sgemv (28-29 GB/s), so those CPUs keep sgemv.
//
// float_decode_avx512.cpp is compiled twice, as the VNNI block kernels are
// (block_dot_vnni.hpp): into the library with AVX-512 enabled (namespace avx512_float,
// to be called only where the CPU has AVX512F: float_decode_here checks), and into the
// tests with AVX2 alone, SIMDe carrying out the 512-bit instructions (namespace
// avx512_float_emulated), so the suite checks the kernel's arithmetic on AVX2-only
// machines too.
// Thread contract: pure functions; float_decode_here's choice is made once.

#include <cstdint>

namespace canopy::backends {

/// y[r * out + o] (= or +=) sum_i x[r * in + i] w[i * stride + o] for rows r < `rows`
/// (1 or 2) and outputs o in [first, last); `first` a multiple of 16, `stride` >= out.
/// Each output's sum runs over i in order, in float, one FMA a term; with `accumulate`
/// y's old value is added to it last.
using float_decode_signature = void(const float* x, int rows, const float* w,
                                    std::int64_t in, std::int64_t out,
                                    std::int64_t stride, std::int64_t first,
                                    std::int64_t last, float* y, bool accumulate);
using float_decode_fn = float_decode_signature*;

namespace avx512_float {
float_decode_signature decode_in_out;
}
namespace avx512_float_emulated { // in the test executables only
float_decode_signature decode_in_out;
}

/// The kernel one or two rows take here: avx512_float's where the CPU has AVX512F
/// (and the OS saves its registers) and ATEN_CPU_CAPABILITY does not ask for less
/// ("avx2" or "default", as the suite's `.as_on_avx2` runs do); nullptr elsewhere
/// (sgemv then).
float_decode_fn float_decode_here();

/// "avx512" where float_decode_here has a kernel, "blas" where sgemv runs.
const char* float_decode_kernels_here();

/// `kernel` over all of y's outputs, split over ATen's intra-op threads.
void decode_in_out(float_decode_fn kernel, const float* x, std::int64_t rows,
                   const float* w, std::int64_t in, std::int64_t out, std::int64_t stride,
                   float* y, bool accumulate);

} // namespace canopy::backends
