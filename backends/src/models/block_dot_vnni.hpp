#pragma once
// The block products (block_dot.hpp) for CPUs with AVX-512 VNNI (AVX512F, BW, VL and
// VNNI: Ice Lake and later Xeons, AMD Zen 4 and later). `vpdpbusd` (its 256-bit form)
// adds the four products of unsigned by signed bytes into each int32 lane in one
// instruction, where AVX2 takes two (`maddubs`, `madd`) and, for int8, a sign step
// more (Note [vnni pairs]). Its 512-bit form runs the wide tiles of sixteen rows
// (Note [wide tiles]).
//
// Each kernel gives exactly the AVX2 kernel's bits (Note [exact block sums]), so a
// machine answers alike whichever of the two it runs.
//
// block_dot_vnni.cpp is compiled twice:
//  - into the library with AVX-512 enabled (namespace avx512_vnni), whose functions
//    must only be called where the CPU has those extensions (block_dot.cpp checks);
//  - into the tests with AVX2 alone (namespace avx512_vnni_emulated), SIMDe standing in
//    for each VNNI instruction, so the suite checks the kernels' arithmetic on the
//    AVX2-only machines it also runs on.
// Only the functions below leave that file: taking their address runs no AVX-512 code.
// Thread contract: pure functions.

#include "models/block_dot.hpp"

namespace canopy::backends {

namespace avx512_vnni {
block_dot_signature dot_q8_0, dot_q4_0;
prepare_wide_signature prepare_wide_q8_0, prepare_wide_q4_0;
wide_dot_signature wide_dot;
} // namespace avx512_vnni
namespace avx512_vnni_emulated { // in the test executables only
block_dot_signature dot_q8_0, dot_q4_0;
prepare_wide_signature prepare_wide_q8_0, prepare_wide_q4_0;
wide_dot_signature wide_dot;
} // namespace avx512_vnni_emulated

} // namespace canopy::backends
